"""KDCube's default **v2** react agent (issue 37 §0): seeded random turns, each a list of the
model's answers (one to several actions each), driven through v2's real decision node
(``conformance.v2_driver``: ``ReactSolverV2._decision_node`` → ``react_decision_stream_v2`` →
``stream_with_channels``, ``_validate_decision``, ``_validate_tool_call_protocol``,
``ToolSubsystem.validate_tool_params``, ``_route_after_decision``) with only the model's text
scripted, against Traitdeck's ``engine.round.react_v2``."""

from __future__ import annotations

import random
from typing import Any

NAME = "v2"
MIN_CASES = 150

#: (policy name in ``round_policies``, iteration the turn is at)
POLICY = "sample"
ITERATIONS = [0, 0, 0, 3, 13, 14]


def _action(rng: random.Random, tools: list[str]) -> dict[str, Any]:
    kind = rng.choices(
        ["known", "unknown", "react", "delegate", "fetch", "final", "bad"],
        weights=[8, 3, 2, 1, 1, 3, 3],
    )[0]
    if kind == "final":
        out: dict[str, Any] = {"action": rng.choice(["complete", "exit"])}
        variant = rng.randrange(4)
        if variant < 2:
            out["final_answer"] = "done"
        elif variant == 2:
            out["final_answer"] = "done"
            out["notes"] = "n"
        else:
            out["final_answer"] = "done"
            out["tool_id"] = rng.choice(tools)
        return out
    if kind == "bad":
        variant = rng.randrange(6)
        if variant == 0:
            return {"action": "call_tool", "params": {}}
        if variant == 1:
            return {"action": "call_tool", "tool_id": rng.choice(tools), "params": [1]}
        if variant == 2:
            return {"action": "call_tool", "tool_id": rng.choice(tools), "params": None}
        if variant == 3:
            return {"action": "call_tool", "tool_id": rng.choice(tools), "final_answer": "x"}
        if variant == 4:
            return {"action": "call_tool", "tool_id": "", "params": {}}
        return {"action": rng.choice(["answer", " complete "]), "final_answer": "x"}
    tool = {
        "known": lambda: rng.choice(tools),
        "unknown": lambda: rng.choice(["nope.tool", "workspace_jobs.nope", "mcp.ghost"]),
        "react": lambda: rng.choice(["react.read", "react.write", "react.plan"]),
        "delegate": lambda: "react.delegate",
        "fetch": lambda: "ctx_tools.fetch_ctx",
    }[kind]()
    params: dict[str, Any] = {"q": "x"}
    if tool == "react.read":
        params = rng.choice([{"paths": ["a"]}, {}])
    out = {"action": "call_tool", "tool_id": tool}
    if rng.random() < 0.85:
        out["params"] = params
    return out


def generate(tools: list[str]) -> list[dict[str, Any]]:
    rng = random.Random(2037)
    cases = []
    for number in range(200):
        decisions = []
        for _ in range(rng.choice([1, 1, 2, 3, 4])):
            width = rng.choices([0, 1, 2, 3], weights=[1, 8, 4, 2])[0]
            decisions.append([_action(rng, tools) for _ in range(width)])
        cases.append(
            {
                "id": f"v2-{number:03d}",
                "round": {
                    "turn_id": "turn-1",
                    "iteration": rng.choice(ITERATIONS),
                    "attempts": decisions,
                },
            }
        )
    return cases


def _tools() -> list[str]:
    from conformance import round_policies

    sample = round_policies.policies()[POLICY]
    out: list[str] = []
    for agent in sample["policy"]["surfaces"]["as_consumer"]["agents"].values():
        for connection in agent.get("tools", []):
            alias = connection.get("alias")
            for name in (connection.get("allowed") or [])[:3]:
                if isinstance(name, str) and name != "*":
                    out.append(f"{alias}.{name}")
    return out or ["workspace_jobs.search"]


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance import runtime_policy, v2_driver

    adapters, cases = runtime_policy.generated_cases(rt, POLICY, generate)
    out = []
    for case in cases:
        spec = case["round"]
        decisions = [{"actions": actions} for actions in spec["attempts"]]
        answer = v2_driver.drive_turn(rt, adapters, decisions, iteration=spec["iteration"])
        out.append(
            {"id": case["id"], "input": {"policy": POLICY, "round": spec}, "runtime": answer}
        )
    return out


def predict(case: dict[str, Any]) -> Any:
    from conformance import round_policies
    from engine.round.react_v2 import run_v2, v2_answer
    from engine.round.round_spec import parse_round_spec
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_agent

    entry = round_policies.policies()[case["policy"]]
    resolution = resolve_agent(entry["policy"], "main", parse_manifest(entry["manifest"]))
    known = frozenset(t.tool_id for t in resolution.tools if not t.builtin)
    spec = parse_round_spec(case["round"])
    return [v2_answer(d) for d in run_v2(spec.attempts, known, iteration=spec.iteration)]
