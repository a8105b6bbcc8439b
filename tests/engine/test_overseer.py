from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.vocabulary import EARLY_PROFILE
from engine.round.dryrun import RoundSpec, dry_run
from engine.round.overseer import (
    Action,
    Overseer,
    Verdict,
    effective_cap,
    explain,
    oversee,
    strategy_of,
)
from engine.traits.round_policy import RoundPolicy

TRAITS: dict[str, Mapping[str, Any]] = {
    "web_search": {"strategy": ["exploration"]},
    "react.read": {"strategy": ["exploration"]},
    "react.write": {"strategy": ["exploitation"]},
    "react.plan": {"strategy": ["neutral"]},
    "react.delegate": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)},
    "browser.click": {"strategy": ["exploitation", "exploration"]},
    "no_strategy": {"note": "traits without a strategy"},
}


def resolve(tool_id: str, params: Any) -> Mapping[str, Any] | None:
    return TRAITS.get(tool_id)


def call(tool_id: str | None, params: Any = None, *, has_params: bool | None = None) -> Action:
    given_params = params is not None if has_params is None else has_params
    return Action("call_tool", tool_id, params, given_params)


COMPLETE = Action("complete", None, final_answer="done")
EXIT = Action("exit", None, final_answer="done")
THINK = Action("think", None)


def codes(verdicts: list[Verdict]) -> list[str | None]:
    return [v.code for v in verdicts]


def test_it_rejects_exploitation_after_exploration() -> None:
    verdicts = oversee([call("web_search"), call("react.write")], resolve)
    assert [v.accepted for v in verdicts] == [True, False]
    assert verdicts[1].code == "multi_action_bundle_strategy_incompatible"
    assert verdicts[1].extra == {
        "index": 1,
        "tool_id": "react.write",
        "strategy": ["exploitation"],
        "first_index": 0,
        "first_tool_id": "web_search",
        "first_strategy": ["exploration"],
    }


def test_it_accepts_exploration_after_exploitation() -> None:
    verdicts = oversee([call("react.write"), call("web_search")], resolve)
    assert codes(verdicts) == [None, None]


def test_it_sorts_strategy_lists_in_extras_but_keeps_input_order_on_the_verdict() -> None:
    click = oversee([call("browser.click"), call("no_strategy")], resolve)
    assert click[0].strategy == ("exploitation", "exploration")
    assert click[1].extra is not None
    assert click[1].extra["first_strategy"] == ["exploitation", "exploration"]
    assert click[1].extra["strategy"] == ["unknown"]


def test_it_rejects_an_unsupported_action_even_at_index_0_and_stops_the_stream() -> None:
    verdicts = oversee([THINK, call("web_search")], resolve)
    assert len(verdicts) == 1
    assert verdicts[0].code == "multi_action_bundle_mixed_actions"
    assert verdicts[0].extra == {"index": 0, "action": "think"}
    assert verdicts[0].strategy == ("unknown",)


SHORT = {
    "multi_action_bundle_strategy_incompatible": "incompatible",
    "multi_action_bundle_mixed_actions": "mixed",
    "multi_action_bundle_too_many_actions": "too_many",
    "multi_action_bundle_non_neutral_after_final_answer": "non_neutral_after_final",
}


@pytest.mark.parametrize(
    ("actions", "judged"),
    [
        # The rejection raises inside the stream: nothing after it is observed.
        ([call("web_search"), call("react.write"), call("react.plan")], [None, "incompatible"]),
        ([call("react.plan"), THINK, COMPLETE], [None, "mixed"]),
        ([call("react.plan")] * 4, [None, None, "too_many"]),
        ([EXIT, call("web_search"), call("react.plan")], [None, "non_neutral_after_final"]),
    ],
)
def test_it_stops_the_stream_at_the_first_rejection(
    actions: list[Action], judged: list[str | None]
) -> None:
    verdicts = oversee(actions, resolve)
    assert [SHORT[v.code] if v.code else None for v in verdicts] == judged


def test_it_skips_actions_the_stream_never_identifies() -> None:
    # No action word, or a call_tool whose tool id never streamed: the overseer never hears of
    # them, so they neither take a place under the cap nor stop the stream.
    actions = [Action("", None), call(None), call("react.plan"), call("  "), call("web_search")]
    verdicts = oversee(actions, resolve, 2)
    assert [(v.index, v.accepted) for v in verdicts] == [(2, True), (4, True)]


def test_it_rejects_actions_past_the_cap_with_the_runtime_extra() -> None:
    verdicts = oversee([call("react.plan"), call("web_search"), call("react.read")], resolve)
    assert codes(verdicts) == [None, None, "multi_action_bundle_too_many_actions"]
    assert verdicts[2].extra == {
        "index": 2,
        "action": "call_tool",
        "tool_id": "react.read",
        "max_actions": 2,
    }


def test_it_names_no_tool_as_an_empty_string_when_a_final_answer_is_past_the_cap() -> None:
    verdicts = oversee([call("react.plan"), COMPLETE], resolve, 1)
    assert verdicts[1].extra == {
        "index": 1,
        "action": "complete",
        "tool_id": "",
        "max_actions": 1,
    }


@pytest.mark.parametrize(
    ("declared", "cap"),
    [(None, 2), (0, 2), (-1, 1), (-3, 1), (1, 1), (2, 2), (4, 4)],
)
def test_it_reads_no_cap_or_0_as_2_and_a_negative_cap_as_1(declared: int | None, cap: int) -> None:
    assert effective_cap(declared) == cap


@pytest.mark.parametrize(("declared", "accepted"), [(3, 3), (1, 1), (-1, 1), (0, 2), (None, 2)])
def test_it_honours_a_declared_cap(declared: int | None, accepted: int) -> None:
    actions = [call("react.plan"), call("web_search"), call("react.read")]
    verdicts = oversee(actions, resolve, declared)
    assert sum(v.accepted for v in verdicts) == accepted
    if accepted < 3:
        assert verdicts[-1].extra is not None
        assert verdicts[-1].extra["max_actions"] == accepted


def test_it_rejects_a_final_answer_after_a_non_neutral_action() -> None:
    verdicts = oversee([call("react.plan"), call("web_search"), COMPLETE], resolve, 5)
    assert verdicts[2].code == "multi_action_bundle_final_answer_after_non_neutral"
    assert verdicts[2].extra == {
        "index": 2,
        "action": "complete",
        "first_index": 1,
        "first_tool_id": "web_search",
        "first_strategy": ["exploration"],
    }


def test_it_accepts_a_final_answer_after_neutral_actions_and_a_second_final() -> None:
    verdicts = oversee([call("react.plan"), COMPLETE, EXIT], resolve, 3)
    assert codes(verdicts) == [None, None, None]
    assert verdicts[1].strategy == ("exploitation",)


def test_it_rejects_a_final_answer_after_a_mixed_neutral_action() -> None:
    mixed = {"mixed": {"strategy": ["neutral", "exploration"]}}
    verdicts = oversee([call("mixed"), COMPLETE], lambda tool, params: mixed.get(tool))
    assert verdicts[1].code == "multi_action_bundle_final_answer_after_non_neutral"
    assert verdicts[1].extra is not None
    assert verdicts[1].extra["first_strategy"] == ["exploration", "neutral"]


def test_it_rejects_a_non_neutral_action_after_a_final_answer_naming_its_strategy() -> None:
    verdicts = oversee([EXIT, call("web_search")], resolve)
    assert verdicts[1].code == "multi_action_bundle_non_neutral_after_final_answer"
    assert verdicts[1].extra == {
        "index": 1,
        "tool_id": "web_search",
        "strategy": ["exploration"],
        "first_index": 0,
        "first_action": "exit",
    }


def test_it_accepts_a_neutral_action_after_a_final_answer() -> None:
    assert codes(oversee([COMPLETE, call("react.plan")], resolve)) == [None, None]


def test_it_still_compares_a_neutral_action_with_non_final_actions_after_a_final() -> None:
    actions = [call("react.plan"), COMPLETE, call("react.delegate")]
    assert codes(oversee(actions, resolve, 3)) == [None, None, None]


def test_it_resolves_an_unknown_tool_to_unknown_and_runs_it_alone() -> None:
    verdicts = oversee([call("nobody.knows"), call("react.plan")], resolve)
    assert verdicts[0].accepted
    assert verdicts[0].strategy == ("unknown",)
    assert verdicts[1].code == "multi_action_bundle_strategy_incompatible"
    after = oversee([call("react.plan"), call("nobody.knows")], resolve)
    assert after[1].code == "multi_action_bundle_strategy_incompatible"
    final = oversee([call("nobody.knows"), COMPLETE], resolve)
    assert final[1].code == "multi_action_bundle_final_answer_after_non_neutral"


def test_it_judges_an_action_before_its_params_arrive() -> None:
    # A namespace override depends on params.namespace, which has not streamed when the overseer
    # identifies the action: the online verdict uses the tool's default traits.
    seen: list[Any] = []

    def by_namespace(tool_id: str, params: Any) -> Mapping[str, Any]:
        seen.append(params)
        namespace = params.get("namespace") if isinstance(params, Mapping) else None
        return {"strategy": ["neutral" if namespace == "mem" else "exploitation"]}

    verdicts = oversee(
        [call("svc.search", {"namespace": "docs"}), call("svc.upsert", {"namespace": "mem"})],
        lambda tool, params: (
            {"strategy": ["exploration"]} if tool == "svc.search" else by_namespace(tool, params)
        ),
    )
    assert verdicts[1].code == "multi_action_bundle_strategy_incompatible"
    assert seen == [None]


def test_it_gives_final_answers_exploitation_and_unsupported_actions_unknown() -> None:
    assert strategy_of(COMPLETE, resolve) == ("exploitation",)
    assert strategy_of(Action("dance", "web_search"), resolve) == ("unknown",)
    assert strategy_of(call(None), resolve) == ("unknown",)
    assert strategy_of(call("browser.click"), resolve) == ("exploitation", "exploration")


# One overseer per decision call: a re-stream (a later attempt) meets what was accepted before.


def test_it_judges_a_restream_against_what_earlier_attempts_accepted() -> None:
    overseer = Overseer(resolve)
    assert overseer.observe(0, call("web_search")).accepted
    # Attempt 2 re-streams: index 0 again, then an exploitation call.
    assert overseer.observe(0, call("react.plan")).accepted
    again = overseer.observe(1, call("react.write"))
    assert again.code == "multi_action_bundle_strategy_incompatible"
    assert again.extra is not None
    assert again.extra["first_tool_id"] == "web_search"


def test_it_accepts_an_index_it_already_accepted_without_a_check() -> None:
    # The runtime keeps accepted indexes: a re-streamed index passes even when the action there
    # changed into one that would be rejected (and even past the cap).
    overseer = Overseer(resolve, 1)
    overseer.observe(0, COMPLETE)
    swapped = overseer.observe(0, call("web_search"))
    assert (swapped.accepted, swapped.code) == (True, None)
    assert overseer.observe(1, call("react.plan")).code == "multi_action_bundle_too_many_actions"


def test_it_counts_the_cap_across_attempts() -> None:
    overseer = Overseer(resolve)
    overseer.observe(0, call("react.plan"))
    overseer.observe(1, call("react.plan"))
    assert overseer.observe(2, call("react.plan")).code == "multi_action_bundle_too_many_actions"


_tool_ids = st.sampled_from([*TRAITS, "nobody.knows", None, " "])
_actions = st.one_of(
    st.builds(call, _tool_ids),
    st.sampled_from([COMPLETE, EXIT, THINK, Action("", None)]),
)


@given(st.lists(_actions, max_size=10), st.one_of(st.none(), st.integers(-3, 6)))
def test_it_never_accepts_more_than_the_cap_and_stops_at_a_rejection(
    actions: list[Action], declared: int | None
) -> None:
    verdicts = oversee(actions, resolve, declared)
    assert sum(v.accepted for v in verdicts) <= effective_cap(declared)
    identified = [i for i, action in enumerate(actions) if action.identified]
    indexes = [v.index for v in verdicts]
    assert indexes == identified[: len(indexes)]
    assert all(v.accepted for v in verdicts[:-1])
    if len(indexes) < len(identified):
        assert not verdicts[-1].accepted
    assert all((v.code is None) == v.accepted for v in verdicts)


# Early eligibility (§2.4 with §2.10 item 2)


def starts_early(
    traits: Mapping[str, Any] | None,
    params: Any = None,
    *,
    has_params: bool = True,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    before: tuple[Action, ...] = (),
    max_actions: int | None = None,
) -> bool:
    """Whether the round's last action starts early (the engine asks ``starts_early``)."""
    tool = "svc.tool"
    policy = RoundPolicy(
        traits_by_id={tool: traits} if traits is not None else {},
        overrides_by_id={tool: overrides} if overrides else {},
    )
    actions = (*before, call(tool, params, has_params=has_params))
    spec = RoundSpec("turn", 0, max_actions, (actions,))
    return bool(
        dry_run(spec, policy, multi_action_mode="on")["attempts"][0]["actions"][-1]["early"]
    )


DELEGATE = TRAITS["react.delegate"]


@pytest.mark.parametrize(
    ("params", "has_params", "early"),
    [
        ({"charter": "A"}, True, True),
        ({}, True, True),
        # Missing or null params count as {} for early execution.
        (None, False, True),
        (None, True, True),
        # Only a value that is not a mapping disqualifies.
        (["a"], True, False),
        ("charter", True, False),
        (3, True, False),
    ],
)
def test_it_starts_a_neutral_early_profile_call_early_unless_its_params_are_not_a_mapping(
    params: Any, has_params: bool, early: bool
) -> None:
    assert starts_early(DELEGATE, params, has_params=has_params) is early


def test_it_keeps_a_mixed_strategy_call_on_the_ordinary_path() -> None:
    traits = {"strategy": ["neutral", "exploration"], "execution": dict(EARLY_PROFILE)}
    assert not starts_early(traits, {})


def test_it_keeps_a_call_with_an_incomplete_profile_on_the_ordinary_path() -> None:
    execution = {k: v for k, v in EARLY_PROFILE.items() if k != "result_dependency"}
    assert not starts_early({"strategy": ["neutral"], "execution": execution}, {})


def test_it_matches_an_upper_case_profile_after_normalization() -> None:
    traits = {
        "strategy": [" NEUTRAL "],
        "execution": {key: value.upper() for key, value in EARLY_PROFILE.items()},
    }
    assert starts_early(traits, {})


def test_it_uses_the_calls_params_so_a_namespace_override_can_make_a_call_early() -> None:
    # The overseer accepts it with default traits; early eligibility uses the call's traits
    # resolved with its params (here: an override that is neutral with the early profile).
    override = {"mem": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)}}
    exploit = {"strategy": ["exploitation"]}
    assert starts_early(exploit, {"namespace": "mem"}, overrides=override)
    assert not starts_early(exploit, {"namespace": "task"}, overrides=override)


def test_it_never_starts_a_rejected_or_unknown_call_early() -> None:
    plan_then_final = (call("react.plan"), COMPLETE)
    assert not starts_early(DELEGATE, {}, before=plan_then_final, max_actions=2)
    assert starts_early(DELEGATE, {}, before=plan_then_final, max_actions=3)
    # A tool the policy does not know fails the runtime's protocol check.
    assert not starts_early(None, {})


# Explanations


def test_it_explains_an_incompatible_strategy_with_both_tools() -> None:
    verdict = oversee([call("web_search"), call("react.write")], resolve)[1]
    assert explain(verdict) == (
        "web_search (exploration) was accepted first; "
        "react.write (exploitation) cannot follow it in the same round"
    )


def test_it_explains_the_other_rules_in_plain_words() -> None:
    too_many = oversee([call("react.plan")] * 3, resolve)[2]
    assert "the round allows at most 2 actions" in explain(too_many)
    final = oversee([call("web_search"), COMPLETE], resolve)[1]
    assert explain(final).startswith("web_search (exploration) was accepted first; ")
    assert "the final answer (complete)" in explain(final)
    after = oversee([EXIT, call("web_search")], resolve)[1]
    assert explain(after).startswith("the final answer (exit) was accepted first; web_search")
    mixed = oversee([THINK], resolve)[0]
    assert "'think' is not a supported action" in explain(mixed)
    assert explain(oversee([COMPLETE], resolve)[0]) == "accepted"


@pytest.mark.parametrize("declared", [1, -2])
def test_it_says_action_in_the_singular_for_a_cap_of_1(declared: int) -> None:
    verdict = oversee([call("react.plan")] * 2, resolve, declared)[1]
    assert "at most 1 action;" in explain(verdict)
