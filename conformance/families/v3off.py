"""v3 with multi-action **off** through the runtime's channel streamer (issue 37 §1): seeded
rounds of one to three actions (compatible and incompatible pairs, early-start tools, caps,
finals, unknown tools) driven as one decision through v3's real decision node
(``conformance.v2_driver.drive_v3_decision``: ``ReactSolverV2._decision_node`` of
``solutions/react/v3/runtime.py`` with its own timeline streamer, overseer, early listener and
``workspace_streamer_v3.stream_with_channels``), only the model's text scripted; against
Traitdeck's dry-run (``react_version`` v3) of the same round: what runs, whether the model is
asked again, how many calls started early."""

from __future__ import annotations

import random
from typing import Any

NAME = "v3off"
MIN_CASES = 100

POLICY = "sample"
MODES = ["off", "off", "off", "", "bogus"]


def _action(rng: random.Random, tools: list[str]) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.08:
        return {"action": "complete", "final_answer": "done"}
    if roll < 0.14:
        return {"action": "call_tool", "tool_id": "workspace_jobs.nope", "params": {}}
    if roll < 0.34:
        return {
            "action": "call_tool",
            "tool_id": "workspace_jobs.launch_background_job",
            "params": {},
        }
    return {"action": "call_tool", "tool_id": rng.choice(tools), "params": {"q": rng.randrange(3)}}


def generate(tools: list[str]) -> list[dict[str, Any]]:
    rng = random.Random(3103)
    out = []
    for number in range(150):
        width = rng.choices([1, 2, 3], weights=[2, 6, 3])[0]
        out.append(
            {
                "id": f"v3off-{number:03d}",
                "policy": POLICY,
                "multi_action_mode": rng.choice(MODES),
                "round": {
                    "turn_id": "turn-1",
                    "iteration": 0,
                    "max_actions": rng.choice([None, None, 1, 2, 3]),
                    "actions": [_action(rng, tools) for _ in range(width)],
                },
            }
        )
    return out


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance import runtime_policy, v2_driver

    adapters, cases = runtime_policy.generated_cases(rt, POLICY, generate)
    out = []
    for case in cases:
        spec = case["round"]
        answer = v2_driver.drive_v3_decision(
            rt,
            adapters,
            spec["actions"],
            mode=case["multi_action_mode"],
            max_actions=spec["max_actions"],
        )
        out.append(
            {
                "id": case["id"],
                "input": {k: v for k, v in case.items() if k != "id"},
                "runtime": {
                    "route": answer["route"],
                    "runs": answer["runs"],
                    "early_started": answer["early_started"],
                    "asked_again_for_channels": "action_schema_error" in answer["notices"],
                },
            }
        )
    return out


def predict(case: dict[str, Any]) -> Any:
    from conformance import round_policies
    from engine.round.dryrun import dry_run, parse_round_spec
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_agent

    entry = round_policies.policies()[case["policy"]]
    resolution = resolve_agent(entry["policy"], "main", parse_manifest(entry["manifest"]))
    spec = parse_round_spec(case["round"])
    result = dry_run(spec, resolution, multi_action_mode=case["multi_action_mode"])
    rows = result["attempts"][-1]["actions"]
    accepted = [row for row in rows if row["verdict"] == "accepted"]
    if any(row.get("answer_streamed") for row in rows):
        route, runs = "exit", None
    elif accepted and accepted[0]["action"] == "call_tool":
        route, runs = "tool_execution", accepted[0]["tool_id"]
    elif accepted:
        route, runs = "exit", None
    else:
        route, runs = "decision", None
    return {
        "route": route,
        "runs": runs,
        "early_started": sum(1 for row in rows if row["early"]),
        "asked_again_for_channels": any(row.get("code") == "action_schema_error" for row in rows),
    }
