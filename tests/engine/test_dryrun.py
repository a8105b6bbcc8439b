"""The explained dry-run (engine.round.dryrun): rows, explanations, the ledger and modes.

Over 500 lines on purpose: the cases follow DESIGN §2's rules in order, sharing one set of
policy builders."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.vocabulary import EARLY_PROFILE
from engine.catalog.multi_action import ModeSources, multi_action_mode
from engine.round.dryrun import (
    RoundSpecError,
    describe,
    dry_run,
    parse_round_spec,
)
from engine.round.ledger import fingerprint, tool_call_id
from engine.round.overseer import Action
from engine.tools.resolution import resolve_agent
from engine.traits.round_policy import RoundPolicy

EARLY = {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)}
#: Configured tools beside the react.* built-ins (react.delegate is neutral with the early
#: profile, react.plan neutral, react.write exploitation). The named service's upsert is
#: exploitation by default and early in the ``mem`` namespace.
POLICY = RoundPolicy(
    traits_by_id={
        "jobs.launch": EARLY,
        "jobs.lookup": {"strategy": ["exploration"]},
        "jobs.export": {"strategy": ["exploitation"]},
        "named_services.upsert_object": {"strategy": ["exploitation"]},
        "exec_tools.execute_code_python": {"strategy": ["exploration"]},
    },
    overrides_by_id={"named_services.upsert_object": {"mem": EARLY}},
)

DELEGATE = {
    "action": "call_tool",
    "tool_id": "react.delegate",
    "params": {"charter": "A", "agent_alias": "strong_agent"},
}
# The provider retry sends the same call with its keys in another order.
DELEGATE_REORDERED = {
    "action": "call_tool",
    "tool_id": "react.delegate",
    "params": {"agent_alias": "strong_agent", "charter": "A"},
}
LOOKUP = {"action": "call_tool", "tool_id": "jobs.lookup", "params": {"q": "x"}}
EXPORT = {"action": "call_tool", "tool_id": "jobs.export", "params": {"q": "x"}}
PLAN = {"action": "call_tool", "tool_id": "react.plan", "params": {}}
COMPLETE = {"action": "complete", "final_answer": "done"}
#: DESIGN §2.5's test vector: turn-1, iteration 2, index 0, react.delegate with DELEGATE's params.
TOOL_CALL_ID = "tc_5ca55cec48db"
FINGERPRINT = "40b78e51de2d48e9f19370949ed7eafe6594198e5a75bc7896e0cd02e0a4681f"


def run(data: Any, mode: str = "off") -> dict[str, Any]:
    return dry_run(parse_round_spec(data), POLICY, multi_action_mode=mode)


def actions(data: Any, mode: str = "off", attempt: int = 0) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = run(data, mode)["attempts"][attempt]["actions"]
    return result


def one_round(*items: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"turn_id": "turn-1", "iteration": 2, "actions": list(items), **more}


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    return [row["verdict"] for row in rows]


def test_it_starts_the_design_test_vector_early_with_its_ledger_ids() -> None:
    row = actions(one_round(DELEGATE))[0]
    assert row == {
        "index": 0,
        "action": "call_tool",
        "tool_id": "react.delegate",
        "strategy": ["neutral"],
        "online": {"verdict": "accepted", "code": None, "extra": {}},
        "backstop": None,
        "verdict": "accepted",
        "early": True,
        "ledger": "started",
        "tool_call_id": TOOL_CALL_ID,
        "fingerprint": FINGERPRINT,
        "explanation": "accepted",
    }


def test_it_stops_the_stream_at_the_first_rejection() -> None:
    rows = actions(one_round(LOOKUP, EXPORT, DELEGATE, COMPLETE))
    assert verdicts(rows) == ["accepted", "rejected", "not_observed", "not_observed"]
    assert [row["online"]["verdict"] for row in rows] == [
        "accepted",
        "rejected",
        "not_observed",
        "not_observed",
    ]
    # Never observed, so never started early either.
    assert rows[2]["ledger"] is None
    assert rows[2]["explanation"].startswith("never observed")


def test_it_reports_rejections_with_the_runtimes_code_extra_and_explanation() -> None:
    rejected = actions(one_round(LOOKUP, EXPORT))[1]
    extra = {
        "index": 1,
        "tool_id": "jobs.export",
        "strategy": ["exploitation"],
        "first_index": 0,
        "first_tool_id": "jobs.lookup",
        "first_strategy": ["exploration"],
    }
    assert rejected["online"] == {
        "verdict": "rejected",
        "code": "multi_action_bundle_strategy_incompatible",
        "extra": extra,
    }
    assert (rejected["verdict"], rejected["code"], rejected["extra"]) == (
        "rejected",
        "multi_action_bundle_strategy_incompatible",
        extra,
    )
    assert rejected["explanation"].startswith("jobs.lookup (exploration) was accepted first")


def test_it_leaves_code_and_extra_off_actions_that_were_not_rejected() -> None:
    accepted = actions(one_round(LOOKUP, EXPORT))[0]
    assert "code" not in accepted
    assert "extra" not in accepted


def test_it_names_no_tool_for_final_answers_and_unknown_for_unsupported_actions() -> None:
    (think,) = actions(one_round({"action": "think", "tool_id": "x.y"}))
    assert (think["tool_id"], think["strategy"]) == ("x.y", ["unknown"])
    assert think["extra"] == {"index": 0, "action": "think"}
    (final,) = actions(one_round({"action": "exit", "final_answer": "bye"}))
    assert (final["tool_id"], final["strategy"], final["verdict"]) == (
        None,
        ["exploitation"],
        "accepted",
    )


@pytest.mark.parametrize(("declared", "cap"), [(None, 2), (0, 2), (3, 3), (1, 1), (-1, 1)])
def test_it_reports_the_cap_the_online_overseer_enforces(declared: int | None, cap: int) -> None:
    spec = one_round(PLAN, PLAN, PLAN)
    if declared is not None:
        spec["max_actions"] = declared
    result = run(spec, "on")
    assert result["max_actions"] == cap
    online = [row["online"]["verdict"] for row in result["attempts"][0]["actions"]]
    assert online.count("accepted") == min(cap, 3)


def test_it_accepts_one_action_online_under_a_negative_cap_but_rejects_every_position_after() -> (
    None
):
    # The runtime's own case (conformance early-358): online the cap is 1; the backstop reads
    # -1 as is and rejects every bundle position, the unobserved ones included.
    bare_word, bare_call = {"action": ""}, {"action": "call_tool"}
    rows = actions(
        one_round(bare_word, {**PLAN, "params": {"q": "a"}}, bare_call, max_actions=-1), "on"
    )
    assert [row["online"]["verdict"] for row in rows] == [
        "not_observed",
        "accepted",
        "not_observed",
    ]
    assert verdicts(rows) == ["rejected"] * 3
    assert [row["backstop"]["extra"] for row in rows] == [
        {"index": n, "max_actions": -1} for n in range(3)
    ]
    assert {row["code"] for row in rows} == {"multi_action_bundle_too_many_actions"}


def test_with_multi_action_off_two_accepted_action_channels_run_nothing() -> None:
    # Recorded through v3's real decision node (conformance family v3off): the channel streamer
    # reads two <channel:action> instances as multiple_channel_instances:2, nothing of the
    # decision runs and the model is asked again; an early start has already run.
    result = run(one_round(LOOKUP, DELEGATE), "off")
    assert result["multi_action_mode"] == "off"
    assert result["attempts"][0]["multi_action_mode"] == "off"
    first, second = result["attempts"][0]["actions"]
    assert (first["online"]["verdict"], first["verdict"]) == ("accepted", "rejected")
    assert (first["code"], first["extra"]) == (
        "action_schema_error",
        {"parser_error": "multiple_channel_instances:2"},
    )
    assert first["backstop"] is None
    assert "nothing of it runs" in first["explanation"]
    assert (second["online"]["verdict"], second["verdict"]) == ("accepted", "rejected")
    assert (second["ledger"], second["tool_call_id"]) == ("started", tool_call_id("turn-1", 2, 1))
    assert second["early"] is True


def test_with_multi_action_off_an_online_rejection_keeps_the_first_action_and_runs_it() -> None:
    # Recorded too: the overseer's rejection stops the stream, the recovery packet keeps what it
    # accepted, and with the mode off the first of those runs.
    first, second = run(one_round(LOOKUP, EXPORT), "off")["attempts"][0]["actions"]
    assert (second["online"]["verdict"], second["verdict"]) == ("rejected", "rejected")
    assert first["verdict"] == "accepted"


def test_it_runs_every_surviving_action_when_multi_action_is_on() -> None:
    result = run(one_round(LOOKUP, DELEGATE), " Safe_Fanout ")
    assert result["attempts"][0]["multi_action_mode"] == "on"
    rows = result["attempts"][0]["actions"]
    assert verdicts(rows) == ["accepted", "accepted"]
    assert [row["backstop"]["verdict"] for row in rows] == ["accepted", "accepted"]


def test_it_checks_a_single_decision_after_generation_even_with_multi_action_off() -> None:
    write = {
        "action": "call_tool",
        "tool_id": "react.write",
        "params": {"content": "x", "path": "a"},
    }
    row = actions(one_round(write))[0]
    assert (row["online"]["verdict"], row["backstop"]) == ("accepted", None)
    assert (row["verdict"], row["code"]) == ("rejected", "path_not_first")


@pytest.mark.parametrize(
    ("items", "index", "code"),
    [
        (
            [COMPLETE, {"action": "exit", "final_answer": "bye"}],
            1,
            "multi_action_bundle_mixed_actions",
        ),
        ([PLAN, {"action": "complete"}], 1, "final_answer_required"),
        ([PLAN, {**COMPLETE, "notes": "n"}], 1, "final_answer_with_notes"),
        (
            [
                LOOKUP,
                {
                    "action": "call_tool",
                    "tool_id": "exec_tools.execute_code_python",
                    "params": {"contract": ["c"]},
                },
            ],
            1,
            "multi_action_bundle_unsafe_tool",
        ),
        (
            [
                {
                    "action": "call_tool",
                    "tool_id": "react.write",
                    "params": {"content": "x", "path": "a"},
                },
                LOOKUP,
            ],
            0,
            "path_not_first",
        ),
    ],
)
def test_it_rejects_after_generation_with_the_backstops_code(
    items: list[dict[str, Any]], index: int, code: str
) -> None:
    # The code channel incomplete: a code-execution call is unsafe in a bundle.
    rows = actions({**one_round(*items), "exec_code_complete": False}, "on")
    row = rows[index]
    assert row["online"]["verdict"] == "accepted"
    assert row["backstop"]["verdict"] == "rejected"
    assert (row["verdict"], row["code"]) == ("rejected", code)
    assert row["explanation"]
    others = [other for n, other in enumerate(rows) if n != index]
    assert all(other["verdict"] == "accepted" for other in others)


def test_it_calls_an_unknown_tool_invalid_after_generation() -> None:
    # Online an unknown tool may run alone; the call behind it never streamed a tool id, so the
    # overseer never saw it, but it is part of the bundle the backstop checks.
    unknown = {"action": "call_tool", "tool_id": "nope.tool", "params": {}}
    rows = actions(one_round(unknown, {"action": "call_tool"}), "on")
    assert [row["online"]["verdict"] for row in rows] == ["accepted", "not_observed"]
    assert [row["code"] for row in rows] == ["tool_call_invalid", "missing_tool_id"]
    assert rows[0]["extra"]["violations"][0]["code"] == "unknown_tool_id"
    assert "not in adapters/available tools" in rows[0]["explanation"]


def test_it_ignores_a_namespace_override_online_but_starts_the_call_early_with_it() -> None:
    mem = {
        "action": "call_tool",
        "tool_id": "named_services.upsert_object",
        "params": {"namespace": "mem:notes"},
    }
    # Online the overseer has no params yet: the upsert is exploitation and cannot follow
    # exploration, although in mem it would be neutral.
    online = actions(one_round(LOOKUP, mem))[1]
    assert online["code"] == "multi_action_bundle_strategy_incompatible"
    assert online["online"]["extra"]["strategy"] == ["exploitation"]
    # Alone it is accepted, and its params (mem:notes falls back to mem) make it early.
    started = actions(one_round(mem))[0]
    assert (started["verdict"], started["early"], started["ledger"]) == (
        "accepted",
        True,
        "started",
    )
    assert started["strategy"] == ["neutral"]
    plain = actions(one_round({**mem, "params": {"namespace": "task"}}))[0]
    assert (plain["early"], plain["ledger"]) == (False, None)


def test_it_counts_missing_or_null_params_as_empty_for_an_early_start() -> None:
    bare = {"action": "call_tool", "tool_id": "react.delegate"}
    null = {**bare, "params": None}
    listed = {**bare, "params": ["x"]}
    assert [actions(one_round(item))[0]["early"] for item in (bare, null, listed)] == [
        True,
        True,
        False,
    ]


def test_it_dedups_a_reordered_retry_by_fingerprint_and_the_sibling_at_the_old_slot() -> None:
    result = run(
        {
            "turn_id": "turn-1",
            "iteration": 2,
            "attempts": [[DELEGATE, LOOKUP], [LOOKUP, DELEGATE_REORDERED]],
        },
        "on",
    )
    first, second = (attempt["actions"] for attempt in result["attempts"])
    assert (first[0]["ledger"], first[0]["tool_call_id"], first[0]["fingerprint"]) == (
        "started",
        TOOL_CALL_ID,
        FINGERPRINT,
    )
    # Only the last attempt reaches execution: the first stream's calls are dropped.
    assert verdicts(first) == ["dropped", "dropped"]
    moved = second[1]
    assert moved["verdict"] == "accepted"
    assert (moved["ledger"], moved["match"], moved["tool_call_id"]) == (
        "dedup",
        "fingerprint",
        TOOL_CALL_ID,
    )
    assert (moved["fingerprint"], moved["original_action_index"]) == (FINGERPRINT, 0)
    # The runtime looks up every accepted call: the lookup now at the delegate's old slot is a
    # dedup too, and does not run.
    sibling = second[0]
    assert (sibling["ledger"], sibling["match"], sibling["tool_call_id"]) == (
        "dedup",
        "slot",
        TOOL_CALL_ID,
    )
    assert sibling["early"] is False
    assert sibling["fingerprint"] == fingerprint("jobs.lookup", {"q": "x"})


def test_it_dedups_a_retry_at_the_same_index_by_slot_whatever_it_holds() -> None:
    changed = {**DELEGATE, "params": {"charter": "B"}}
    result = run(
        {"turn_id": "turn-1", "iteration": 2, "attempts": [[DELEGATE, COMPLETE], [changed]]}
    )
    retry = result["attempts"][1]["actions"][0]
    assert (retry["ledger"], retry["match"], retry["tool_call_id"]) == (
        "dedup",
        "slot",
        TOOL_CALL_ID,
    )
    assert retry["fingerprint"] == fingerprint("react.delegate", {"charter": "B"})


def test_it_judges_a_retry_with_the_overseer_of_the_first_attempt() -> None:
    # Attempt 1 accepted a final answer at index 0; the re-stream's exploitation call at index 0
    # passes unchecked, then a final answer behind it is rejected after generation.
    result = run(
        {
            "turn_id": "t/x",
            "iteration": 1,
            "attempts": [[COMPLETE, EXPORT], [EXPORT, COMPLETE]],
        },
        "fanout",
    )
    first, second = (attempt["actions"] for attempt in result["attempts"])
    assert first[1]["code"] == "multi_action_bundle_non_neutral_after_final_answer"
    assert [row["online"]["verdict"] for row in second] == ["accepted", "accepted"]
    assert second[1]["code"] == "multi_action_bundle_final_answer_after_non_neutral"
    assert second[1]["backstop"]["extra"] == {
        "first_index": 0,
        "first_tool_id": "jobs.export",
        "first_strategy": ["exploitation"],
    }


def test_it_takes_the_round_files_mode_first() -> None:
    spec = parse_round_spec(one_round(PLAN, multi_action_mode="on"))
    assert spec.multi_action_mode == "on"
    assert multi_action_mode(spec.multi_action_mode, ModeSources("off", "off", "off")) == "on"
    bare = parse_round_spec(one_round(PLAN))
    assert multi_action_mode(bare.multi_action_mode, ModeSources(None, "fanout", "off")) == "fanout"
    assert multi_action_mode(bare.multi_action_mode, ModeSources()) == "off"


def test_it_takes_the_explicit_choice_then_the_profile_then_the_setting() -> None:
    assert multi_action_mode(None, ModeSources("on", "off", "off")) == "on"
    assert multi_action_mode(None, ModeSources(None, None, "safe_fanout")) == "safe_fanout"
    # A source that says "" says something: the runtime reads it as off.
    assert multi_action_mode(None, ModeSources(None, "", "on")) == ""


def test_it_runs_against_an_agent_resolution() -> None:
    data = {
        "surfaces": {
            "as_consumer": {
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "python",
                                "module": "jobs",
                                "alias": "jobs",
                                "allowed": ["launch"],
                                "tool_traits": {"launch": EARLY},
                            }
                        ]
                    }
                }
            }
        }
    }
    spec = parse_round_spec(
        one_round({"action": "call_tool", "tool_id": "jobs.launch", "params": {}})
    )
    row = dry_run(spec, resolve_agent(data, "main"))["attempts"][0]["actions"][0]
    assert (row["verdict"], row["ledger"]) == ("accepted", "started")


def test_it_produces_json_serializable_output() -> None:
    result = run(
        {
            "turn_id": "t",
            "iteration": 1,
            "attempts": [[DELEGATE, LOOKUP, LOOKUP], [LOOKUP, DELEGATE]],
        },
        "on",
    )
    assert json.loads(json.dumps(result)) == result


def test_it_describes_each_action_in_plain_words() -> None:
    result = run(
        {
            "turn_id": "turn-1",
            "iteration": 2,
            "attempts": [
                [DELEGATE, LOOKUP, EXPORT],
                [LOOKUP, DELEGATE_REORDERED],
                [],
            ],
        },
        "on",
    )
    lines = describe(result)
    assert lines[0].startswith(
        "attempt 1 #0 call_tool react.delegate [neutral]: dropped, started early as "
        "tc_5ca55cec48db: a later attempt re-streamed the round and replaced this stream"
    )
    assert lines[2].startswith(
        "attempt 1 #2 call_tool jobs.export [exploitation]: rejected online "
        "(multi_action_bundle_too_many_actions): the round allows at most 2 actions"
    )
    # Attempt 2 is not the last one either: its calls never reach execution.
    assert lines[4].startswith(
        "attempt 2 #1 call_tool react.delegate [neutral]: dropped, dedup: reuses "
        "tc_5ca55cec48db (matched by fingerprint): "
    )
    assert lines[5] == "attempt 3: no actions"


def test_it_says_which_stage_rejected_an_action() -> None:
    lines = describe(run(one_round(PLAN, {"action": "complete"}), "on"))
    assert lines[1].startswith(
        "attempt 1 #1 complete [exploitation]: rejected after generation (final_answer_required)"
    )


def test_it_parses_a_single_actions_list_as_one_attempt() -> None:
    spec = parse_round_spec(
        {
            "turn_id": " turn-1 ",
            "iteration": 0,
            "actions": [DELEGATE, {"action": "complete", "final_answer": "ok", "notes": "n"}],
        }
    )
    assert spec.turn_id == "turn-1"
    assert spec.multi_action_mode is None
    assert spec.attempts == (
        (
            Action("call_tool", "react.delegate", DELEGATE["params"], True),
            Action("complete", None, None, False, final_answer="ok", notes="n"),
        ),
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "the round must be a JSON object"),
        ({"iteration": 0, "actions": []}, "turn_id"),
        ({"turn_id": "  ", "iteration": 0, "actions": []}, "turn_id"),
        ({"turn_id": 7, "iteration": 0, "actions": []}, "turn_id"),
        ({"turn_id": "t", "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": -1, "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": True, "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": 1.5, "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": 0}, "attempts"),
        ({"turn_id": "t", "iteration": 0, "actions": [], "attempts": [[]]}, "not both"),
        ({"turn_id": "t", "iteration": 0, "attempts": {}}, "attempts"),
        ({"turn_id": "t", "iteration": 0, "attempts": []}, "attempts"),
        ({"turn_id": "t", "iteration": 0, "attempts": [[], "x"]}, "attempts[1]"),
        ({"turn_id": "t", "iteration": 0, "actions": {"action": "complete"}}, "actions"),
        ({"turn_id": "t", "iteration": 0, "actions": ["complete"]}, "actions[0]"),
        ({"turn_id": "t", "iteration": 0, "actions": [{"tool_id": "x"}]}, "actions[0].action"),
        ({"turn_id": "t", "iteration": 0, "actions": [{"action": 5}]}, "actions[0].action"),
        (
            {"turn_id": "t", "iteration": 0, "attempts": [[{"action": "call_tool", "tool_id": 3}]]},
            "attempts[0][0].tool_id",
        ),
        (
            {"turn_id": "t", "iteration": 0, "actions": [{"action": "exit", "final_answer": 1}]},
            "actions[0].final_answer",
        ),
        (
            {"turn_id": "t", "iteration": 0, "actions": [{"action": "exit", "notes": ["n"]}]},
            "actions[0].notes",
        ),
        ({"turn_id": "t", "iteration": 0, "max_actions": "2", "actions": []}, "max_actions"),
        ({"turn_id": "t", "iteration": 0, "max_actions": False, "actions": []}, "max_actions"),
        (
            {"turn_id": "t", "iteration": 0, "multi_action_mode": True, "actions": []},
            "multi_action_mode",
        ),
    ],
)
def test_it_refuses_a_malformed_round_naming_the_field(data: Any, field: str) -> None:
    with pytest.raises(RoundSpecError) as error:
        parse_round_spec(data)
    message = str(error.value)
    assert field in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("action", "code"),
    [
        # An unknown tool as the round's one action: the decision node's protocol check.
        ({"action": "call_tool", "tool_id": "jobs.nope", "params": {}}, "tool_call_invalid"),
        # Code execution without its contract, alone in the round (the backstop never sees it).
        (
            {"action": "call_tool", "tool_id": "exec_tools.execute_code_python", "params": {}},
            "tool_call_invalid",
        ),
        # A tool the ReAct loop may not call at all.
        (
            {"action": "call_tool", "tool_id": "ctx_tools.fetch_ctx", "params": {}},
            "tool_not_allowed_in_react",
        ),
    ],
)
def test_it_rejects_a_single_call_the_decision_node_refuses(
    action: dict[str, Any], code: str
) -> None:
    for mode in ("off", "on"):
        (row,) = dry_run(parse_round_spec(one_round(action)), POLICY, multi_action_mode=mode)[
            "attempts"
        ][0]["actions"]
        assert (row["verdict"], row["code"]) == ("rejected", code), mode


# --- complete exec code (issue 37 §5) -------------------------------------------------------------

EXEC_POLICY = RoundPolicy(
    traits_by_id={
        "react.write": {"strategy": ["neutral"]},
        "exec_tools.execute_code_python": {"strategy": ["neutral"]},
    },
    overrides_by_id={},
)


def _write(path: str) -> dict[str, Any]:
    params = {"path": path, "channel": "canvas", "content": "x", "kind": "display"}
    return {"action": "call_tool", "tool_id": "react.write", "params": params}


def _exec(*files: str) -> dict[str, Any]:
    contract = [{"name": f"f{n}", "filename": name} for n, name in enumerate(files)]
    return {
        "action": "call_tool",
        "tool_id": "exec_tools.execute_code_python",
        "params": {"contract": contract},
    }


def _exec_round(**extra: Any) -> dict[str, Any]:
    actions = [_write("a.md"), _write("b.md"), _exec("a.md", "b.md")]
    return {"turn_id": "t", "iteration": 0, "max_actions": 4, "actions": actions, **extra}


def test_a_round_file_is_code_complete_unless_it_says_so() -> None:
    result = dry_run(parse_round_spec(_exec_round()), EXEC_POLICY, multi_action_mode="on")
    assert result["exec_code_complete"] is True
    last = result["attempts"][0]["actions"][2]
    assert last["code"] == "multi_action_bundle_same_file_collision"
    off = dry_run(
        parse_round_spec(_exec_round(exec_code_complete=False)),
        EXEC_POLICY,
        multi_action_mode="on",
    )
    assert off["exec_code_complete"] is False
    assert off["attempts"][0]["actions"][2]["code"] == "multi_action_bundle_unsafe_tool"
    assert "order_dependent" not in off
    # The caller's default applies when the round does not say.
    unsaid = dry_run(
        parse_round_spec(_exec_round()),
        EXEC_POLICY,
        multi_action_mode="on",
        exec_code_complete=False,
    )
    assert unsaid["exec_code_complete"] is False


def test_a_collision_that_depends_on_the_runtimes_set_order_is_marked() -> None:
    result = dry_run(parse_round_spec(_exec_round()), EXEC_POLICY, multi_action_mode="on")
    assert result["order_dependent"] is True
    [info] = result["infos"]
    assert info["code"] == "runtime-order-dependent"
    assert info["files"] == ["a.md", "b.md"]
    assert "a.md, b.md" in info["message"]
    # Walking the contract in order: the first file names the collision.
    assert result["attempts"][0]["actions"][2]["extra"] == {"path": "a.md", "first_index": 0}
    assert any("runtime-order-dependent" in line for line in describe(result))
    # One contract file taken, none written later: reproducible.
    steady = _exec_round(actions=[_write("a.md"), _exec("a.md", "c.md")])
    assert "order_dependent" not in dry_run(
        parse_round_spec(steady), EXEC_POLICY, multi_action_mode="on"
    )


def test_exec_code_complete_must_be_a_boolean() -> None:
    with pytest.raises(RoundSpecError, match="exec_code_complete must be true or false, not"):
        parse_round_spec(_exec_round(exec_code_complete="yes"))


def test_the_text_says_the_code_channel_assumed_only_for_a_round_that_executes_code() -> None:
    with_code = dry_run(parse_round_spec(_exec_round()), EXEC_POLICY, multi_action_mode="on")
    assert any(
        line.startswith("assumed the code channel streamed complete")
        for line in describe(with_code)
    )
    plain = dry_run(parse_round_spec(one_round(PLAN)), EXEC_POLICY, multi_action_mode="on")
    assert not any("code channel" in line for line in describe(plain))
