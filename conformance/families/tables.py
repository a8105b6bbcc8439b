"""The runtime's own test tables, restated as rounds (its test code is never copied: each case
names the runtime test whose inputs and behaviour it restates) plus the ledger identity vectors.
Rounds run through the same driver and the same Traitdeck prediction as ``rounds``."""

from __future__ import annotations

import itertools
from typing import Any

from conformance.families import rounds

NAME = "tables"
MIN_CASES = 40

POLICY = "tables"
S = ["exploration", "exploitation", "neutral", "unknown"]


def call(tool: str, params: Any = None, **extra: Any) -> dict[str, Any]:
    tool_id = tool if "." in tool else f"t.{tool}"
    out: dict[str, Any] = {"action": "call_tool", "tool_id": tool_id}
    out["params"] = {} if params is None else params
    out.update(extra)
    return out


NS = "named_services.search_objects"
FINAL = {"action": "complete", "final_answer": "done"}
EXEC = {"action": "call_tool", "tool_id": "exec_tools.execute_code_python", "params": {}}
DELEGATE = {
    "action": "call_tool",
    "tool_id": "react.delegate",
    "params": {"charter": "A", "agent_alias": "strong_agent"},
}


def _round(
    name: str, mode: str, *attempts: list[dict[str, Any]], cap: int | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"turn_id": "turn-1", "iteration": 2, "attempts": list(attempts)}
    if cap is not None:
        spec["max_actions"] = cap
    return {"id": name, "policy": POLICY, "round": spec, "multi_action_mode": mode}


def inputs() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    # test_action_overseer / test_multi_action: the ordered strategy matrix, online and after.
    for first, later in itertools.product(S, S):
        for mode in ("off", "on"):
            cases.append(
                _round(
                    f"ordered_strategy_matrix[{first}-{later}]-{mode}",
                    mode,
                    [call(first), call(later + "2")],
                )
            )
    cases += [
        _round(
            "third_action_denied_even_when_compatible",
            "on",
            [call("exploration"), call("exploration2"), call("neutral")],
        ),
        _round(
            "exploitation_then_exploration_for_staged_work",
            "on",
            [call("exploitation"), call("exploration")],
        ),
        _round(
            "candidate_checked_against_all_prior_accepted",
            "on",
            [call("exploration"), call("neutral"), call("exploitation")],
            cap=3,
        ),
        _round(
            "first_unknown_admitted_later_exploration_denied",
            "on",
            [call("unknown"), call("exploration")],
        ),
        _round("final_answer_may_follow_neutral", "on", [call("neutral"), FINAL]),
        _round("final_answer_after_non_neutral_denied", "on", [call("exploration"), FINAL]),
        _round("non_neutral_after_final_denied", "on", [FINAL, call("exploration")]),
        _round("neutral_after_final_allowed", "on", [FINAL, call("neutral")]),
        _round("unsafe_exec_dropped_sibling_kept", "on", [call("exploration"), EXEC]),
        _round(
            "suppressed_tool_final_answer_keeps_tool",
            "on",
            [call("exploration", final_answer="early text"), call("exploration2")],
        ),
        _round(
            "two_explorations_and_later_final_dropped",
            "on",
            [call("exploration"), call("exploration2"), FINAL],
            cap=3,
        ),
        _round("namespace_override_for_final_close", "on", [call(NS, {"namespace": "mem"}), FINAL]),
        _round(
            "default_trait_for_other_namespaces", "on", [call(NS, {"namespace": "task"}), FINAL]
        ),
        _round(
            "namespace_override_online_uses_default", "off", [call(NS, {"namespace": "mem"}), FINAL]
        ),
        # test_early_tool_execution
        _round("delegate_starts_early_and_retry_dedups", "off", [DELEGATE], [DELEGATE]),
        _round(
            "reordered_retry_dedups_by_fingerprint",
            "on",
            [DELEGATE, call("exploration")],
            [call("exploration"), DELEGATE],
        ),
        _round(
            "changed_payload_same_slot_still_dedups",
            "off",
            [call("early", {"x": 1})],
            [call("early", {"x": 2})],
        ),
        _round("non_neutral_with_profile_never_early", "off", [call("early_exploit")]),
        _round(
            "stream_index_kept_after_rejected_sibling",
            "on",
            [call("exploration"), call("exploitation"), call("early")],
        ),
        _round(
            "consumed_tool_not_reexecuted_post_generation", "on", [call("early"), call("neutral")]
        ),
    ]
    return cases


IDENTITY = [
    ("turn-1", 2, 0, "react.delegate", {"charter": "A", "agent_alias": "strong_agent"}),
    ("turn-1", 2, 0, "react.delegate", {"agent_alias": "strong_agent", "charter": "A"}),
    ("  turn-1 ", 2, 0, " react.delegate ", {"charter": "A", "agent_alias": "strong_agent"}),
    ("turn-1", -3, -1, "x.y", None),
    ("t", 0, 7, "x.y", ["not", "a", "mapping"]),
    ("t", 1, 1, "x.y", {"text": "ü ß 漢"}),
]


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance import round_driver, runtime_policy

    adapters = runtime_policy.recorded_adapters(rt, POLICY)
    cases = []
    for case in inputs():
        rows = round_driver.drive_round(rt, adapters, case["round"], case["multi_action_mode"])
        cases.append(
            {
                "id": case["id"],
                "input": {"kind": "round", **{k: v for k, v in case.items() if k != "id"}},
                "runtime": [rounds.answer_from_rows(attempt) for attempt in rows],
            }
        )
    for n, (turn, iteration, index, tool, params) in enumerate(IDENTITY):
        decision: dict[str, Any] = {"action": "call_tool", "tool_call": {"tool_id": tool}}
        if params is not None:
            decision["tool_call"]["params"] = params
        ident = rt.early.early_tool_execution_identity(
            turn_id=turn, iteration=iteration, action_index=index, decision=decision
        )
        cases.append(
            {
                "id": f"identity-{n}",
                "input": {
                    "kind": "identity",
                    "turn_id": turn,
                    "iteration": iteration,
                    "action_index": index,
                    "tool_id": tool,
                    "params": params,
                },
                "runtime": {
                    "action_key": ident.action_key,
                    "tool_call_id": ident.tool_call_id,
                    "fingerprint": ident.semantic_fingerprint,
                },
            }
        )
    return cases


def predict(case: dict[str, Any]) -> Any:
    if case["kind"] == "round":
        return rounds.predict(case)
    from engine.round import ledger

    args = (case["turn_id"], case["iteration"], case["action_index"])
    return {
        "action_key": ledger.action_key(*args),
        "tool_call_id": ledger.tool_call_id(*args),
        "fingerprint": ledger.fingerprint(case["tool_id"], case["params"]),
    }
