"""Policy regression suites (issue 13): cases that pin the verdicts rounds must get, and
``traitdeck test``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from engine.replay.draft_impact import outcomes
from engine.round.dryrun import dry_run
from policy.cli import run
from policy.domain.suites import (
    Suite,
    SuiteError,
    case_from_outcomes,
    dump_suite,
    load_suite,
    parse_suite,
    run_suite,
)
from tests.engine.test_draft_impact import (
    EXPORT_EXPLORES,
    LAUNCH_EXPLORES,
    ROUNDS,
    SAMPLE,
    resolution,
)

SEARCH_THEN_EXPORT: dict[str, Any] = {
    "turn_id": "t-1",
    "iteration": 0,
    "max_actions": 3,
    "attempts": [
        [
            {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {"q": "x"}},
            {"action": "call_tool", "tool_id": "workspace_jobs.export_report", "params": {}},
        ]
    ],
}
RULE = "multi_action_bundle_strategy_incompatible"


def suite(*expect: dict[str, Any], round_data: dict[str, Any] | None = None) -> Suite:
    return parse_suite(
        {
            "agent": "main",
            "cases": [
                {
                    "name": "an export may not follow a search",
                    "round": round_data or SEARCH_THEN_EXPORT,
                    "expect": list(expect),
                }
            ],
        }
    )


def test_a_case_passes_when_the_policy_gives_what_it_pins() -> None:
    pinned = suite(
        {"attempt": 1, "index": 0, "verdict": "accepted"},
        {"attempt": 1, "index": 1, "verdict": "rejected", "rule": RULE},
    )
    [result] = run_suite(pinned, resolution(SAMPLE))
    assert result.passed, result.failures


def test_a_changed_trait_fails_the_case_and_says_how() -> None:
    pinned = suite({"attempt": 1, "index": 1, "verdict": "rejected", "rule": RULE})
    [result] = run_suite(pinned, resolution(EXPORT_EXPLORES))
    # With multi-action off (the default) and nothing rejected while streaming, the two action
    # channels run nothing (recorded, conformance family v3off).
    assert result.failures == (
        "attempt 1 #1 workspace_jobs.export_report: expected rejection by "
        "multi_action_bundle_strategy_incompatible, got rejected (action_schema_error)",
    )


def test_cases_saved_from_rounds_pass_under_their_policy_and_fail_where_it_changes() -> None:
    """Save 100 rounds as cases with what they got under the sample: all pass under the sample;
    under a policy where the early tool is not neutral, exactly the rounds that change fail."""
    sample, changed = resolution(SAMPLE), resolution(LAUNCH_EXPLORES)
    cases = []
    differs = set()
    for recorded in ROUNDS[:100]:
        spec = recorded.spec
        got = outcomes(dry_run(spec, sample))
        data = json.loads(json.dumps(_round_json(spec)))
        cases.append(case_from_outcomes(spec.turn_id, data, got).as_dict())
        if got != outcomes(dry_run(spec, changed)):
            differs.add(spec.turn_id)
    saved = load_suite(dump_suite(parse_suite({"agent": "main", "cases": cases})))
    assert all(r.passed for r in run_suite(saved, sample))
    failing = {r.name for r in run_suite(saved, changed) if not r.passed}
    assert failing == differs
    assert failing


def _action_json(action: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"action": action.action, "tool_id": action.tool_id}
    if action.has_params:
        found["params"] = action.params
    for key in ("final_answer", "notes"):
        if getattr(action, key) is not None:
            found[key] = getattr(action, key)
    return found


def _round_json(spec: Any) -> dict[str, Any]:
    return {
        "turn_id": spec.turn_id,
        "iteration": spec.iteration,
        "max_actions": spec.max_actions,
        "attempts": [[_action_json(a) for a in attempt] for attempt in spec.attempts],
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "a suite is a mapping"),
        ({"agent": "main", "cases": {}}, "cases: must be a list"),
        ({"agent": "main", "cases": [{"name": "x", "round": {}, "expect": []}]}, "cases[0].round"),
        (
            {"agent": "main", "cases": [{"name": "x", "round": SEARCH_THEN_EXPORT, "expect": []}]},
            "cases[0].expect: must be a non-empty list",
        ),
        (
            {
                "agent": "main",
                "cases": [
                    {"name": "x", "round": SEARCH_THEN_EXPORT, "expect": [{"index": 0, "v": 1}]}
                ],
            },
            "cases[0].expect[0].v: is not one of",
        ),
        (
            {
                "agent": "main",
                "cases": [
                    {
                        "name": "x",
                        "round": SEARCH_THEN_EXPORT,
                        "expect": [{"index": 0, "verdict": "maybe"}],
                    }
                ],
            },
            "cases[0].expect[0].verdict: must be one of accepted",
        ),
    ],
)
def test_a_malformed_suite_names_the_bad_field(data: Any, message: str) -> None:
    with pytest.raises(SuiteError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_suite(data)


# --- traitdeck test ---------------------------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sample.yaml").write_text(SAMPLE, encoding="utf-8")
    (tmp_path / "changed.yaml").write_text(EXPORT_EXPLORES, encoding="utf-8")
    pinned = suite({"attempt": 1, "index": 1, "verdict": "rejected", "rule": RULE})
    (tmp_path / "suite.yaml").write_text(dump_suite(pinned), encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("agent: main\ncases: 3\n", encoding="utf-8")
    return {p.name: str(p) for p in tmp_path.iterdir()}


def test_traitdeck_test_exits_0_when_every_case_passes(files: dict[str, str]) -> None:
    code, out, _ = cli("test", files["sample.yaml"], files["suite.yaml"])
    assert code == 0
    assert out.splitlines()[0] == "ok   an export may not follow a search"
    assert out.splitlines()[-2] == "1 case, all pass"
    assert out.splitlines()[-1] == (
        "react agent assumed: v3 (from the setting TRAITDECK_REACT_AGENT_VERSION); a round's own "
        "react_version wins"
    )


def test_traitdeck_test_runs_the_cases_under_the_react_version_it_names(
    files: dict[str, str],
) -> None:
    """Under v2 (KDCube's default) the two action channels of the pinned round run nothing:
    both are action_schema_error and the model is asked again; the output says which agent."""
    code, out, _ = cli(
        "test", files["sample.yaml"], files["suite.yaml"], "--react-version", "v2",
        "--format", "json",
    )  # fmt: skip
    assert code == 1
    data = json.loads(out)
    assert (data["react_version"], data["react_version_source"]) == ("v2", "the explicit choice")
    assert data["cases"][0]["failures"] == [
        "attempt 1 #1 workspace_jobs.export_report: expected rejection by "
        "multi_action_bundle_strategy_incompatible, got rejected (action_schema_error)"
    ]
    # A case's own react_version wins over the command's.
    pinned = suite(
        {"attempt": 1, "index": 0, "verdict": "rejected", "rule": "action_schema_error"},
        round_data={**SEARCH_THEN_EXPORT, "react_version": "v2"},
    )
    [result] = run_suite(pinned, resolution(SAMPLE), react_version="v3")
    assert result.passed, result.failures


def test_traitdeck_test_exits_1_on_a_failing_case(files: dict[str, str]) -> None:
    code, out, _ = cli("test", files["changed.yaml"], files["suite.yaml"], "--format", "json")
    assert code == 1
    data = json.loads(out)
    assert data["failed"] == 1
    assert data["cases"][0]["failures"][0].startswith("attempt 1 #1 workspace_jobs.export_report")


def test_traitdeck_test_exits_2_on_a_malformed_suite(files: dict[str, str]) -> None:
    code, out, err = cli("test", files["sample.yaml"], files["bad.yaml"])
    assert code == 2
    assert out == ""
    assert "is malformed: cases: must be a list" in err
