"""Every diagnostic's sentence checked against the recorded runtime where its claim is checkable
(issue 38 item 2): each diagnostic is rendered for the conformance policies it applies to, each
checkable claim must be in its text, and the runtime's recorded outcomes must bear it out."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from conformance import fixtures, round_policies
from engine.document.diagnostics import Diagnostic
from policy.domain.analysis import analyze_text


def diagnostics() -> Iterator[tuple[str, Diagnostic]]:
    for name, entry in round_policies.policies().items():
        for found in analyze_text(yaml.safe_dump(entry["policy"])).diagnostics:
            yield name, found


def cases(family: str) -> list[dict[str, Any]]:
    return list(fixtures.read(family)["cases"])


def _v3_off_two_channels_unrejected_run_nothing(_: str, __: Diagnostic) -> bool:
    # v3, mode off: when nothing was rejected while streaming (no online notice), two or more
    # action channels are asked again and run nothing.
    seen = False
    for case in cases("v3off"):
        answer, actions = case["runtime"], case["input"]["round"]["actions"]
        if len(actions) >= 2 and answer["asked_again_for_channels"]:
            seen = True
            if answer["runs"] is not None:
                return False
    return seen


def _v3_off_an_early_start_already_ran(_: str, __: Diagnostic) -> bool:
    return any(
        c["runtime"]["asked_again_for_channels"] and c["runtime"]["early_started"] > 0
        for c in cases("v3off")
    )


def _v3_off_after_a_rejection_the_first_accepted_runs(_: str, __: Diagnostic) -> bool:
    seen = False
    for case in cases("v3off"):
        answer, actions = case["runtime"], case["input"]["round"]["actions"]
        if len(actions) >= 2 and answer["route"] == "tool_execution":
            seen = True
            if answer["runs"] != actions[0]["tool_id"]:
                return False
    return seen


def _v2_several_actions_run_nothing(_: str, __: Diagnostic) -> bool:
    seen = False
    for case in cases("v2"):
        for actions, decision in zip(
            case["input"]["round"]["attempts"], case["runtime"], strict=False
        ):
            if len(actions) >= 2:
                seen = True
                if decision["runs"] is not None or decision["notices"] != ["action_schema_error"]:
                    return False
    return seen


def _v2_two_retries_per_turn(_: str, __: Diagnostic) -> bool:
    # Never more than 2, and a turn that starts with all its iterations ahead exits once both
    # are spent.
    decisions = [(c["input"]["round"]["iteration"], d) for c in cases("v2") for d in c["runtime"]]
    exits = [d for iteration, d in decisions if iteration == 0 and d["route"] == "exit"]
    failed = [d for d in exits if d["notices"]]
    return max(d["retries"] for _i, d in decisions) == 2 and all(d["retries"] == 2 for d in failed)


def _never_starts_early(policy: str, found: Diagnostic) -> bool:
    """The tool the diagnostic names never started early in any recorded round of its policy."""
    match = re.match(r"(?:execution of )?(\S+)", found.message)
    assert match is not None
    tool = match.group(1)
    rounds = [c for c in cases("rounds") if c["input"]["policy"] == policy]
    if not rounds:
        return True  # no recorded round of this policy: nothing contradicts it
    inputs = [(c["input"]["round"]["attempts"], c["runtime"]) for c in rounds]
    calls = 0
    for attempts, answer in inputs:
        for actions, rows in zip(attempts, answer, strict=False):
            for action, row in zip(actions, rows, strict=False):
                if str(action.get("tool_id") or "").strip().endswith(tool.split(".", 1)[-1]):
                    calls += 1
                    if row["early"]:
                        return False
    return calls > 0


def _v2_runs_tools_only_after_the_decision(_: str, __: Diagnostic) -> bool:
    """v2 runs a tool only when its decision node routes the finished decision to execution."""
    decisions = [d for c in cases("v2") for d in c["runtime"]]
    return any(d["runs"] for d in decisions) and all(
        d["route"] == "tool_execution" for d in decisions if d["runs"]
    )


V2_NO_EARLY = "(Under v2, KDCube's default react agent, no tool starts early at all.)"
Check = Callable[[str, Diagnostic], bool]
#: Per code: (the claim as the diagnostic words it, the check against the recordings).
CLAIMS: dict[str, list[tuple[str, Check]]] = {
    "multi-action-off": [
        (
            "if it rejects none, two or more action channels are multiple_channel_instances and "
            "nothing of it runs",
            _v3_off_two_channels_unrejected_run_nothing,
        ),
        ("(an early start already ran)", _v3_off_an_early_start_already_ran),
        (
            "an action it rejects stops the stream and the first accepted action runs",
            _v3_off_after_a_rejection_the_first_accepted_runs,
        ),
        (
            "Under v2 (KDCube's default) there is no overseer: two or more actions run nothing "
            "and the model is asked again",
            _v2_several_actions_run_nothing,
        ),
        ("(2 protocol retries per turn)", _v2_two_retries_per_turn),
    ],
    "execution-inert": [
        ("so it never starts early", _never_starts_early),
        (V2_NO_EARLY, _v2_runs_tools_only_after_the_decision),
    ],
    "execution-incomplete": [
        ("so the tool never starts early", _never_starts_early),
        (V2_NO_EARLY, _v2_runs_tools_only_after_the_decision),
    ],
}


@pytest.mark.parametrize("code", sorted(CLAIMS))
def test_each_checkable_claim_is_in_the_text_and_the_recorded_runtime_bears_it_out(
    code: str,
) -> None:
    rendered = [(policy, d) for policy, d in diagnostics() if d.code == code]
    assert rendered, f"no conformance policy renders {code}"
    for policy, found in rendered:
        text = " ".join(found.message.split())
        for claim, check in CLAIMS[code]:
            assert claim in text, f"{code} for {policy} no longer says: {claim}"
            assert check(policy, found), f"the recordings contradict {code}: {claim}"


def test_the_withdrawn_multi_action_sentences_are_gone() -> None:
    """DESIGN §2.10 item 6 (turn 4): 'ordering rules never see a second action' and 'only the
    first action it streams is executed' are false under both react versions."""
    for _policy, found in diagnostics():
        text = found.message + " " + found.hint
        assert "never see a second action" not in text
        assert "only the first action it streams is executed" not in text


def _tool_lines(text: str) -> str:
    # After the header, the roster and the rule: the tools' own lines.
    return "\n".join(text.split("\n")[3:])


def test_catalog_compact_says_what_the_recorded_compact_catalog_shows() -> None:
    """'reads no strategy or early-start lines': no recorded compact catalog has one (the
    ``compact`` family), for an agent whose react block picks the compact form."""
    sample = round_policies.policies()["sample"]["policy"]
    policy = {**sample, "react": {"main": {"instructions": {"tool_catalog_detail": "compact"}}}}
    [found] = [
        d for d in analyze_text(yaml.safe_dump(policy)).diagnostics if d.code == "catalog-compact"
    ]
    assert "reads no strategy or early-start lines" in " ".join(found.message.split())
    recorded = cases("compact")
    assert recorded
    trait_words = re.compile(r"Scope:|strategy|exploration|exploitation|parallel_with_generation")
    assert not [c["id"] for c in recorded if trait_words.search(_tool_lines(c["runtime_text"]))]
