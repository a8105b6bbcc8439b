from __future__ import annotations

from typing import Any

import pytest

from core.vocabulary import EARLY_PROFILE
from engine.round.backstop import (
    backstop,
    explain_code,
    multi_action_enabled,
    suppressed_final_answer,
    validate_decision,
    validate_protocol,
)
from engine.round.overseer import Action
from engine.traits.round_policy import RoundPolicy

POLICY = RoundPolicy(
    traits_by_id={
        "jobs.lookup": {"strategy": ["exploration"]},
        "named_services.upsert_object": {"strategy": ["exploitation"]},
    },
    overrides_by_id={
        "named_services.upsert_object": {
            "mem": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)}
        }
    },
)


def call(tool_id: str | None, params: Any = None, **texts: Any) -> Action:
    return Action("call_tool", tool_id, params, params is not None, **texts)


def final(action: str = "complete", answer: str | None = "done", **more: Any) -> Action:
    return Action(action, None, final_answer=answer, **more)


LOOKUP = call("jobs.lookup", {"q": "x"})
PLAN = call("react.plan", {})
UPSERT = "named_services.upsert_object"


@pytest.mark.parametrize(
    ("mode", "enabled"),
    [
        ("on", True),
        (" TRUE ", True),
        ("1", True),
        ("yes", True),
        ("Safe_Fanout", True),
        ("fanout", True),
        ("off", False),
        ("nope", False),
        ("", False),
        (None, False),
    ],
)
def test_it_reads_the_multi_action_mode_as_the_runtime_does(
    mode: str | None, enabled: bool
) -> None:
    assert multi_action_enabled(mode) is enabled


@pytest.mark.parametrize(
    ("action", "code"),
    [
        (LOOKUP, None),
        (final(), None),
        (final("exit"), None),
        (Action("think", None), "invalid_action:think"),
        (final(answer=None), "final_answer_required"),
        (final(answer="   "), "final_answer_required"),
        (final(notes="n"), "final_answer_with_notes"),
        (Action("complete", "jobs.lookup", final_answer="done"), "tool_call_with_final_answer"),
        (Action("exit", None, {}, True, final_answer="done"), "tool_call_with_final_answer"),
        (call("jobs.lookup", {}, final_answer="also"), "final_answer_with_tool_call"),
        (call(None), "missing_tool_id"),
        (call("react.write", {"path": "a", "channel": "c", "content": "x", "kind": "k"}), None),
        (call("react.write", {"content": "x", "path": "a"}), "path_not_first"),
        (call("react.write", {"path": "a", "content": "x"}), "channel_not_second"),
        (call("react.write", {"path": "a", "channel": "c", "kind": "k"}), "content_not_third"),
        (call("react.write", {}), None),
    ],
)
def test_it_validates_one_decision_with_the_runtimes_codes(
    action: Action, code: str | None
) -> None:
    assert validate_decision(action) == code


def test_it_blanks_the_final_answer_of_a_tool_call_and_keeps_the_call() -> None:
    kept = suppressed_final_answer(call("jobs.lookup", {}, final_answer="also"))
    assert kept.final_answer == ""
    assert validate_decision(kept) is None


@pytest.mark.parametrize(
    ("action", "violations"),
    [
        (LOOKUP, []),
        (call("jobs.lookup"), []),
        (call("react.delegate", {}), []),
        (call("jobs.lookup", ["x"]), ["bad_params"]),
        (call("nope.tool", {}), ["unknown_tool_id"]),
        (call(None, {}), ["missing_tool_id"]),
        (call("react.read", {"path": "a"}), ["bad_params"]),
        (call("react.read", {"paths": ["a"]}), []),
        (call("exec_tools.execute_code_python", {}), ["unknown_tool_id", "missing_contract"]),
    ],
)
def test_it_lists_the_protocol_violations_of_a_call(action: Action, violations: list[str]) -> None:
    assert [v["code"] for v in validate_protocol(action, POLICY)] == violations


def test_it_counts_the_cap_by_bundle_position() -> None:
    result = backstop([PLAN, LOOKUP, PLAN], POLICY, max_actions=None)
    assert result.accepted == [0, 1]
    assert result.rejected == {
        2: ("multi_action_bundle_too_many_actions", {"index": 2, "max_actions": 2})
    }


def test_it_rejects_every_position_under_a_negative_cap() -> None:
    result = backstop([PLAN, LOOKUP], POLICY, max_actions=-1)
    assert result.accepted == []
    assert {code for code, _ in result.rejected.values()} == {
        "multi_action_bundle_too_many_actions"
    }
    assert result.rejected[1][1] == {"index": 1, "max_actions": -1}
    assert result.error == "multi_action_bundle_too_many_actions"


def test_it_rejects_a_second_final_answer_as_mixed_actions() -> None:
    result = backstop([final(), final("exit")], POLICY, max_actions=None)
    assert result.final_index == 0
    assert result.rejected == {1: ("multi_action_bundle_mixed_actions", {"action": "exit"})}
    assert result.error is None


@pytest.mark.parametrize(
    ("bundle", "rejected"),
    [
        (
            [Action("think", None), PLAN],
            {0: ("multi_action_bundle_mixed_actions", {"action": "think"})},
        ),
        ([PLAN, final(answer=None)], {1: ("final_answer_required", {})}),
        ([PLAN, final(notes="n")], {1: ("final_answer_with_notes", {})}),
        (
            [PLAN, call("exec_tools.execute_code_python", {"contract": ["c"]})],
            {1: ("multi_action_bundle_unsafe_tool", {"tool_id": "exec_tools.execute_code_python"})},
        ),
        ([call("react.write", {"content": "x", "path": "a"}), PLAN], {0: ("path_not_first", {})}),
        ([PLAN, call(None, {})], {1: ("missing_tool_id", {})}),
    ],
)
def test_it_rejects_a_bad_member_of_the_bundle_with_the_runtimes_code(
    bundle: list[Action], rejected: dict[int, tuple[str, dict[str, Any]]]
) -> None:
    assert backstop(bundle, POLICY, max_actions=None).rejected == rejected


def test_it_calls_an_unknown_tool_invalid_rather_than_incompatible() -> None:
    result = backstop([PLAN, call("nope.tool", {})], POLICY, max_actions=None)
    code, extra = result.rejected[1]
    assert code == "tool_call_invalid"
    assert extra == {
        "index": 1,
        "tool_id": "nope.tool",
        "violations": [
            {
                "code": "unknown_tool_id",
                "message": "tool_id 'nope.tool' is not in adapters/available tools",
                "tool_id": "nope.tool",
            }
        ],
    }


def test_it_skips_the_protocol_check_of_a_prevalidated_call() -> None:
    # A call the ledger already holds was checked when it started.
    result = backstop(
        [PLAN, call("react.read", {"path": "a"})],
        POLICY,
        max_actions=None,
        prevalidated=frozenset({1}),
    )
    assert result.accepted == [0, 1]


def test_it_compares_strategies_with_each_calls_params() -> None:
    # After generation the params are there: a namespace override applies.
    plain = backstop([LOOKUP, call(UPSERT, {})], POLICY, max_actions=None)
    assert plain.rejected == {
        1: (
            "multi_action_bundle_strategy_incompatible",
            {
                "tool_id": UPSERT,
                "strategy": ["exploitation"],
                "first_index": 0,
                "first_tool_id": "jobs.lookup",
                "first_strategy": ["exploration"],
            },
        )
    }
    overridden = backstop(
        [LOOKUP, call(UPSERT, {"namespace": "mem:notes"})], POLICY, max_actions=None
    )
    assert (overridden.accepted, overridden.rejected) == ([0, 1], {})


def test_it_rejects_a_non_neutral_call_after_the_final_answer() -> None:
    result = backstop([final(), LOOKUP], POLICY, max_actions=None)
    assert result.final_index == 0
    assert result.rejected == {
        1: (
            "multi_action_bundle_non_neutral_after_final_answer",
            {
                "tool_id": "jobs.lookup",
                "strategy": ["exploration"],
                "first_index": 0,
                "first_action": "complete",
            },
        )
    }


def test_it_rejects_the_final_answer_after_a_non_neutral_call() -> None:
    result = backstop([LOOKUP, final()], POLICY, max_actions=None)
    assert result.accepted == [0]
    assert result.final_index is None
    assert result.rejected == {
        1: (
            "multi_action_bundle_final_answer_after_non_neutral",
            {"first_index": 0, "first_tool_id": "jobs.lookup", "first_strategy": ["exploration"]},
        )
    }


def test_it_keeps_a_final_answer_after_neutral_calls() -> None:
    result = backstop([PLAN, final()], POLICY, max_actions=None)
    assert (result.accepted, result.final_index, result.rejected) == ([0], 1, {})


def test_it_reports_the_first_rejection_when_nothing_survives() -> None:
    result = backstop([Action("think", None), final(answer=None)], POLICY, max_actions=None)
    assert result.error == "multi_action_bundle_mixed_actions"


@pytest.mark.parametrize(
    ("code", "extra", "words"),
    [
        ("multi_action_bundle_unsafe_tool", None, "code-execution tool"),
        ("final_answer_with_notes", None, "may not carry notes"),
        ("path_not_first", {}, "must start with path"),
        ("invalid_action:think", None, "'think' is not an action the runtime knows"),
        (
            "tool_call_invalid",
            {"violations": [{"code": "bad_params", "message": "params must be a dict"}]},
            "invalid (unknown tool id or malformed params): params must be a dict",
        ),
        ("something_new", None, "rejected (something_new)"),
    ],
)
def test_it_explains_a_post_generation_rejection_in_plain_words(
    code: str, extra: dict[str, Any] | None, words: str
) -> None:
    assert words in explain_code(code, extra)


RENDERING = RoundPolicy(
    traits_by_id={
        "rendering_tools.write_pptx": {"strategy": ["exploitation"]},
        "rendering_tools.write_pdf": {"strategy": ["exploitation"]},
        "exec_tools.execute_code_python": {"strategy": ["exploitation"]},
    },
    overrides_by_id={},
)


def write(path: str, tool: str = "react.write") -> Action:
    return call(tool, {"path": path, "channel": "canvas", "content": "x", "kind": "display"})


def render(path: str, content: str, tool: str = "rendering_tools.write_pptx") -> Action:
    return call(tool, {"path": path, "content": content})


def test_it_rejects_the_second_write_of_a_file_named_in_another_case() -> None:
    result = backstop([write("a.md"), write("A.md")], RENDERING, max_actions=None)
    assert result.accepted == [0]
    assert result.rejected == {
        1: ("multi_action_bundle_same_file_collision", {"path": "a.md", "first_index": 0})
    }


def test_it_rejects_a_renderer_reading_a_file_written_in_the_same_round() -> None:
    result = backstop([write("a.md"), render("b.pptx", "ref:a.md")], RENDERING, max_actions=None)
    assert result.accepted == [0]
    assert result.rejected == {
        1: (
            "multi_action_bundle_render_consumes_same_round_source",
            {"ref": "a.md", "source_index": 0},
        )
    }


def test_it_checks_a_renderer_against_a_later_writer_too() -> None:
    result = backstop(
        [render("b.pptx", "ref:/Turn_1/files/A.md"), write("turn_1/files/a.md")],
        RENDERING,
        max_actions=3,
    )
    assert result.accepted == [1]
    assert result.rejected[0] == (
        "multi_action_bundle_render_consumes_same_round_source",
        {"ref": "turn_1/files/a.md", "source_index": 1},
    )


def test_it_reads_a_conversation_file_reference_as_the_runtime_rewrites_it() -> None:
    # The runtime turns "conv:fi:conv_<c>.turn_<t>.files/<rel>" into "conv_<c>.turn_<t>/files/<rel>"
    # (its conversation part stays), so it meets the same reference, never the physical path.
    ref = "ref:conv:fi:conv_c.turn_7.files/R.md"
    logical = backstop(
        [write("conv:fi:conv_c.turn_7.files/r.md"), render("b.pdf", ref)],
        RENDERING,
        max_actions=None,
    )
    assert logical.rejected[1][1] == {"ref": "conv_c.turn_7/files/r.md", "source_index": 0}
    physical = backstop(
        [write("turn_7/files/r.md"), render("b.pdf", ref)], RENDERING, max_actions=None
    )
    assert physical.rejected == {}


def test_it_lets_a_renderer_read_a_file_of_an_earlier_round() -> None:
    # Only files of this bundle count; text content (no ref:) reads nothing.
    result = backstop(
        [write("a.md"), render("b.pptx", "ref:old.md"), render("c.pdf", "a.md")],
        RENDERING,
        max_actions=3,
    )
    assert (result.accepted, result.rejected) == ([0, 1, 2], {})


def test_it_matches_a_renderer_against_a_writer_already_dropped_for_a_collision() -> None:
    bundle = [write("a.md"), write("x.md"), call("react.patch", {"path": "X.MD"})]
    bundle.append(render("b.pptx", "ref:x.md"))
    result = backstop(bundle, RENDERING, max_actions=4)
    assert result.rejected == {
        2: ("multi_action_bundle_same_file_collision", {"path": "x.md", "first_index": 1}),
        3: (
            "multi_action_bundle_render_consumes_same_round_source",
            {"ref": "x.md", "source_index": 1},
        ),
    }


def test_it_counts_contract_files_of_the_one_code_execution_call_as_written() -> None:
    exec_call = call(
        "exec_tools.execute_code_python",
        {"contract": [{"filename": "Out.csv"}, {"filename": "u.txt"}]},
    )
    bundle = [exec_call, write("out.csv")]
    result = backstop(bundle, RENDERING, max_actions=None, exec_code_complete=True)
    assert result.rejected == {
        1: ("multi_action_bundle_same_file_collision", {"path": "out.csv", "first_index": 0})
    }
    # Without a complete code channel the call may not run in a bundle at all.
    plain = backstop(bundle, RENDERING, max_actions=None)
    assert plain.rejected[0][0] == "multi_action_bundle_unsafe_tool"
    assert plain.accepted == [1]


def test_it_runs_the_causality_checks_after_the_strategy_checks() -> None:
    # The incompatible writer is dropped first, so it never owns the path.
    result = backstop(
        [call("jobs.lookup", {"q": "x"}), write("a.md"), write("a.md")],
        POLICY,
        max_actions=3,
    )
    assert result.rejected[1][0] == "multi_action_bundle_strategy_incompatible"
    assert result.rejected[2][0] == "multi_action_bundle_strategy_incompatible"


def test_it_names_the_file_and_the_other_action_in_a_causality_rejection() -> None:
    words = explain_code(
        "multi_action_bundle_render_consumes_same_round_source", {"ref": "a.md", "source_index": 0}
    )
    assert "'a.md'" in words
    assert "#0" in words
    words = explain_code(
        "multi_action_bundle_same_file_collision", {"path": "a.md", "first_index": 0}
    )
    assert "'a.md'" in words
    assert "#0" in words
