from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.domain.overseer import (
    Action,
    Verdict,
    effective_cap,
    explain,
    is_early_eligible,
    oversee,
    strategy_of,
)
from policy.domain.traits import EARLY_PROFILE

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


COMPLETE = Action("complete", None)
EXIT = Action("exit", None)


def codes(verdicts: list[Verdict]) -> list[str | None]:
    return [v.code for v in verdicts]


def test_it_rejects_exploitation_after_exploration() -> None:
    verdicts = oversee([call("web_search"), call("react.write")], resolve)
    assert [v.accepted for v in verdicts] == [True, False]
    assert verdicts[1].code == "multi_action_bundle_strategy_incompatible"
    assert verdicts[1].extra == {
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


def test_it_rejects_an_unsupported_action_even_at_index_0() -> None:
    verdicts = oversee([Action("think", None), call("web_search")], resolve)
    assert verdicts[0].code == "multi_action_bundle_mixed_actions"
    assert verdicts[0].extra is None
    assert verdicts[0].strategy == ("unknown",)
    # The rejected action was dropped: the next one is the first accepted.
    assert verdicts[1].accepted


def test_it_rejects_actions_past_the_cap_with_the_cap_in_extra() -> None:
    verdicts = oversee([call("react.plan"), call("web_search"), call("react.read")], resolve)
    assert codes(verdicts) == [None, None, "multi_action_bundle_too_many_actions"]
    assert verdicts[2].extra == {"max_actions": 2}


def test_it_honours_a_declared_cap() -> None:
    actions = [call("react.plan"), call("web_search"), call("react.read")]
    assert codes(oversee(actions, resolve, 3)) == [None, None, None]
    one = oversee(actions, resolve, 1)
    assert codes(one)[1:] == ["multi_action_bundle_too_many_actions"] * 2
    assert one[1].extra == {"max_actions": 1}


@pytest.mark.parametrize(("declared", "cap"), [(None, 2), (0, 2), (-3, 2), (1, 1), (4, 4)])
def test_it_reads_a_declared_cap_below_1_as_2(declared: int | None, cap: int) -> None:
    assert effective_cap(declared) == cap


def test_it_does_not_count_rejected_actions_towards_the_cap() -> None:
    actions = [call("web_search"), call("react.write"), Action("think", None), call("react.read")]
    verdicts = oversee(actions, resolve)
    assert codes(verdicts) == [
        None,
        "multi_action_bundle_strategy_incompatible",
        "multi_action_bundle_mixed_actions",
        None,
    ]


def test_it_does_not_compare_later_actions_against_rejected_ones() -> None:
    # react.write is rejected after web_search; react.plan then only meets web_search.
    actions = [call("web_search"), call("react.write"), call("react.plan")]
    verdicts = oversee(actions, resolve, 5)
    assert codes(verdicts) == [None, "multi_action_bundle_strategy_incompatible", None]
    # A rejected exploitation must not block a final answer either.
    final = oversee([call("react.plan"), Action("think", None), COMPLETE], resolve)
    assert codes(final) == [None, "multi_action_bundle_mixed_actions", None]


def test_it_rejects_a_final_answer_after_a_non_neutral_action() -> None:
    verdicts = oversee([call("react.plan"), call("web_search"), COMPLETE], resolve, 5)
    assert verdicts[2].code == "multi_action_bundle_final_answer_after_non_neutral"
    assert verdicts[2].extra == {
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


def test_it_rejects_a_non_neutral_action_after_a_final_answer() -> None:
    verdicts = oversee([EXIT, call("web_search")], resolve)
    assert verdicts[1].code == "multi_action_bundle_non_neutral_after_final_answer"
    assert verdicts[1].extra == {"first_index": 0, "first_action": "exit"}


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


def test_it_passes_params_to_the_resolver_for_namespace_overrides() -> None:
    def by_namespace(tool_id: str, params: Any) -> Mapping[str, Any]:
        namespace = params.get("namespace") if isinstance(params, Mapping) else None
        return {"strategy": ["exploitation" if namespace == "task" else "exploration"]}

    verdicts = oversee(
        [
            call("ns.search_objects", {"namespace": "docs"}),
            call("ns.upsert", {"namespace": "task"}),
        ],
        by_namespace,
    )
    assert verdicts[1].code == "multi_action_bundle_strategy_incompatible"


def test_it_gives_final_answers_exploitation_and_unsupported_actions_unknown() -> None:
    assert strategy_of(COMPLETE, resolve) == ("exploitation",)
    assert strategy_of(Action("dance", "web_search"), resolve) == ("unknown",)
    assert strategy_of(call(None), resolve) == ("unknown",)
    assert strategy_of(call("browser.click"), resolve) == ("exploitation", "exploration")


_tool_ids = st.sampled_from([*TRAITS, "nobody.knows"])
_actions = st.one_of(
    st.builds(call, _tool_ids),
    st.sampled_from([COMPLETE, EXIT, Action("think", None)]),
)


@given(st.lists(_actions, max_size=10), st.one_of(st.none(), st.integers(-3, 6)))
def test_it_never_accepts_more_than_the_cap(actions: list[Action], declared: int | None) -> None:
    verdicts = oversee(actions, resolve, declared)
    assert len(verdicts) == len(actions)
    assert sum(v.accepted for v in verdicts) <= effective_cap(declared)
    assert [v.index for v in verdicts] == list(range(len(actions)))
    assert all((v.code is None) == v.accepted for v in verdicts)


# Early eligibility (§2.4)


def accepted_delegate(params: Any = None, *, has_params: bool = True) -> Verdict:
    return oversee([call("react.delegate", params, has_params=has_params)], resolve)[0]


DELEGATE = TRAITS["react.delegate"]


def test_it_starts_a_neutral_call_with_the_profile_and_params_early() -> None:
    assert is_early_eligible(accepted_delegate({"charter": "A"}), DELEGATE)


def test_it_counts_empty_params_as_complete() -> None:
    assert is_early_eligible(accepted_delegate({}), DELEGATE)


def test_it_keeps_a_call_without_params_on_the_ordinary_path() -> None:
    assert not is_early_eligible(accepted_delegate(None, has_params=False), DELEGATE)


def test_it_trusts_has_params_over_a_default_params_value() -> None:
    # An action built without a params key must not start early, whatever its params default is.
    verdict = oversee([Action("call_tool", "react.delegate", {}, has_params=False)], resolve)[0]
    assert not is_early_eligible(verdict, DELEGATE)


@pytest.mark.parametrize("params", [["a"], "charter", None, 3])
def test_it_keeps_a_call_with_non_mapping_params_on_the_ordinary_path(params: Any) -> None:
    assert not is_early_eligible(accepted_delegate(params, has_params=True), DELEGATE)


def test_it_keeps_a_mixed_strategy_call_on_the_ordinary_path() -> None:
    traits = {"strategy": ["neutral", "exploration"], "execution": dict(EARLY_PROFILE)}
    verdict = oversee([call("mixed", {})], lambda tool, params: traits)[0]
    assert verdict.accepted
    assert not is_early_eligible(verdict, traits)


def test_it_keeps_a_call_with_an_incomplete_profile_on_the_ordinary_path() -> None:
    execution = {k: v for k, v in EARLY_PROFILE.items() if k != "result_dependency"}
    traits = {"strategy": ["neutral"], "execution": execution}
    verdict = oversee([call("partial", {})], lambda tool, params: traits)[0]
    assert not is_early_eligible(verdict, traits)


def test_it_matches_an_upper_case_profile_after_normalization() -> None:
    traits = {
        "strategy": [" NEUTRAL "],
        "execution": {key: value.upper() for key, value in EARLY_PROFILE.items()},
    }
    verdict = oversee([call("shouty", {})], lambda tool, params: traits)[0]
    assert is_early_eligible(verdict, traits)


def test_it_never_starts_a_rejected_or_unknown_call_early() -> None:
    rejected = oversee([COMPLETE, call("react.delegate", {}), call("react.delegate", {})], resolve)
    assert not rejected[2].accepted
    assert not is_early_eligible(rejected[2], DELEGATE)
    assert not is_early_eligible(accepted_delegate({}), None)


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
    mixed = oversee([Action("think", None)], resolve)[0]
    assert "'think' is not a supported action" in explain(mixed)
    assert explain(oversee([COMPLETE], resolve)[0]) == "accepted"


def test_it_says_action_in_the_singular_for_a_cap_of_1() -> None:
    verdict = oversee([call("react.plan")] * 2, resolve, 1)[1]
    assert "at most 1 action;" in explain(verdict)
