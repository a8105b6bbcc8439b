"""Seeded random rounds over several policies, through the runtime's whole round pipeline
(online overseer → early listener and ledger → backstop when multi-action is on → execution),
against Traitdeck's dry-run. Also the place where the per-action answer shape is defined."""

from __future__ import annotations

import copy
import random
from typing import Any

NAME = "rounds"
MIN_CASES = 2000
SEED = 20261201
ROUNDS_PER_POLICY = 360

MODES = ["on", "off", "safe_fanout", " TRUE ", "fanout", "nope", "1", "off"]
CAPS: list[int | None] = [None, None, None, None, 0, -1, 1, 3]


def _tool_ids(adapter_ids: list[str]) -> list[str]:
    builtins = [
        "react.read",
        "react.plan",
        "react.hide",
        "react.delegate",
        "react.write",
        "react.memsearch",
        "react.contribute",
    ]
    return adapter_ids + builtins + ["nope.tool", "exec_tools.execute_code_python"]


def _params(rng: random.Random, tool_id: str) -> tuple[bool, Any]:
    """(has params, params)."""
    if tool_id == "react.read":
        return True, {"paths": [f"p{rng.randint(0, 2)}"]}
    roll = rng.random()
    if roll < 0.08:
        return False, None
    if roll < 0.13:
        return True, None
    if roll < 0.17:
        return True, rng.choice([["x"], "text", 3])
    if roll < 0.30:
        return True, {}
    if roll < 0.50 and tool_id.startswith("named_services."):
        return True, {"namespace": rng.choice(["mem", "task", "mem:notes", "MEM", "other", ""])}
    return True, {"q": rng.choice(["a", "b", "ü"])}


def _action(rng: random.Random, tools: list[str]) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.10:
        kind = rng.choice(["complete", "exit"])
        out: dict[str, Any] = {"action": kind}
        sub = rng.random()
        if sub < 0.80:
            out["final_answer"] = "done"
        elif sub < 0.90:
            out["final_answer"] = "done"
            out["notes"] = "n"
        return out
    if roll < 0.13:
        return {"action": rng.choice(["search", "", "think"])}
    if roll < 0.15:
        return {"action": "call_tool"}
    tool_id = rng.choice(tools)
    out = {"action": "call_tool", "tool_id": tool_id}
    has, params = _params(rng, tool_id)
    if has:
        out["params"] = params
    if rng.random() < 0.03:
        out["final_answer"] = "also"
    return out


def _retry(
    rng: random.Random, first: list[dict[str, Any]], tools: list[str]
) -> list[dict[str, Any]]:
    """A provider re-stream: the same actions reordered, or with one sibling altered."""
    again = copy.deepcopy(first)
    if rng.random() < 0.6 and len(again) > 1:
        rng.shuffle(again)
    elif again:
        again[rng.randrange(len(again))] = _action(rng, tools)
    if rng.random() < 0.2:
        again.append(_action(rng, tools))
    return again


def generate(adapter_ids: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The round inputs, from the model-facing ids of each policy's agent ``main``."""
    rng = random.Random(SEED)
    inputs: list[dict[str, Any]] = []
    for policy_name, ids in adapter_ids.items():
        tools = _tool_ids(ids)
        for n in range(ROUNDS_PER_POLICY):
            size = rng.choice([1, 2, 2, 2, 3, 3, 4])
            first = [_action(rng, tools) for _ in range(size)]
            attempts = [first]
            if rng.random() < 0.2:
                attempts.append(_retry(rng, first, tools))
            round_spec: dict[str, Any] = {
                "turn_id": rng.choice(["turn-1", " turn-2 ", "t/x"]),
                "iteration": rng.randint(0, 3),
                "attempts": attempts,
            }
            cap = rng.choice(CAPS)
            if cap is not None:
                round_spec["max_actions"] = cap
            inputs.append(
                {
                    "id": f"{policy_name}-{n}",
                    "policy": policy_name,
                    "round": round_spec,
                    "multi_action_mode": rng.choice(MODES),
                }
            )
    return inputs


def answer_from_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runtime driver's rows in the dry-run's vocabulary (what is compared)."""
    out = []
    for row in rows:
        item: dict[str, Any] = {
            "online": {
                "verdict": row["online"],
                "code": row.get("online_code"),
                "extra": row.get("online_extra", {}),
            },
            "backstop": None,
            "verdict": row["final"],
            "code": None,
            "early": False,
            "ledger": None,
            "tool_call_id": None,
        }
        if "backstop" in row:
            b = row["backstop"]
            item["backstop"] = {
                "verdict": b["verdict"],
                "code": b.get("code"),
                "extra": b.get("extra", {}),
            }
        if row["final"] == "rejected":
            if item["backstop"] is not None and item["backstop"]["verdict"] == "rejected":
                item["code"] = item["backstop"]["code"]
            elif row.get("final_code"):
                item["code"] = row["final_code"]
            else:
                item["code"] = row.get("online_code")
        early = row.get("early")
        if early is not None:
            if early["started"]:
                item.update(early=True, ledger="started", tool_call_id=early["tool_call_id"])
            else:
                item.update(ledger="dedup", tool_call_id=early["tool_call_id"])
        executed = row.get("executed")
        if executed is not None and executed["path"] == "ledger" and item["ledger"] != "started":
            item.update(ledger="dedup", tool_call_id=executed["tool_call_id"])
        elif (
            executed is not None
            and executed["path"] == "ledger"
            and item["tool_call_id"] != executed["tool_call_id"]
        ):
            item["ledger_reused"] = executed["tool_call_id"]
        out.append(item)
    return out


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance import round_driver, round_policies, runtime_policy

    pols = round_policies.policies()
    adapters = {
        name: runtime_policy.agent_adapters(rt, p["policy"], "main", manifest=p["manifest"])
        for name, p in pols.items()
    }
    cases = []
    for case in generate({name: [a["id"] for a in ads] for name, ads in adapters.items()}):
        rows = round_driver.drive_round(
            rt, adapters[case["policy"]], case["round"], case["multi_action_mode"]
        )
        cases.append(
            {
                "id": case["id"],
                "input": {k: v for k, v in case.items() if k != "id"},
                "runtime": [answer_from_rows(attempt) for attempt in rows],
            }
        )
    return cases


COMPARED = (
    "online",
    "backstop",
    "verdict",
    "code",
    "early",
    "ledger",
    "tool_call_id",
    "ledger_reused",
)


def project(result: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Traitdeck's dry-run JSON reduced to the compared fields."""
    out = []
    for attempt in result["attempts"]:
        rows = []
        for action in attempt["actions"]:
            row = {key: action.get(key) for key in COMPARED if key != "ledger_reused"}
            if action.get("ledger_reused") is not None:
                row["ledger_reused"] = action["ledger_reused"]
            rows.append(row)
        out.append(rows)
    return out


def predict(case: dict[str, Any]) -> Any:
    from conformance import round_policies
    from engine.round.dryrun import dry_run, parse_round_spec
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_agent

    policy = round_policies.policies()[case["policy"]]
    resolution = resolve_agent(policy["policy"], "main", parse_manifest(policy["manifest"]))
    spec = parse_round_spec(case["round"])
    return project(dry_run(spec, resolution, multi_action_mode=case["multi_action_mode"]))
