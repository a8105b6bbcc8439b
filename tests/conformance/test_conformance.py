"""Traitdeck predicts what the KDCube runtime's own code answered (the recorded fixtures), case by
case, without the runtime present. Re-record with ``make conformance KDCUBE_SRC=…``."""

from __future__ import annotations

import json

import pytest

from conformance import fixtures
from conformance.compare import compare_family
from conformance.families import FAMILY_MODULES, family

RECORDED = [name for name in FAMILY_MODULES if fixtures.path_for(name).exists()]


def test_it_has_recorded_every_family_from_one_runtime_commit() -> None:
    assert list(FAMILY_MODULES) == RECORDED
    commits = {fixtures.read(name)["runtime"]["commit"] for name in RECORDED}
    assert len(commits) == 1
    (commit,) = commits
    assert len(commit) == 40
    assert fixtures.read(RECORDED[0])["runtime"]["repository"] == "kdcube/kdcube-ai-app"


@pytest.mark.parametrize("name", RECORDED)
def test_it_records_enough_cases(name: str) -> None:
    module = family(name)
    assert len(fixtures.read(name)["cases"]) >= module.MIN_CASES


@pytest.mark.parametrize("name", RECORDED)
def test_it_agrees_with_the_runtime_on_every_case(name: str) -> None:
    result = compare_family(family(name))
    shown = "\n".join(
        f"{d['id']}:\n  runtime:   {json.dumps(d['runtime'])}\n"
        f"  traitdeck: {json.dumps(d['traitdeck'])}"
        for d in result.disagreements[:3]
    )
    assert result.agreements == result.cases, (
        f"{result.cases - result.agreements} of {result.cases} {name} cases disagree:\n{shown}"
    )


def test_the_verdicts_only_path_agrees_with_the_runtime_on_every_round() -> None:
    """``decide`` (impact replay, drift, suites, the bench's decisions/s) against the runtime's
    recorded rounds: verdict, rejection code, early start and dedup of every streamed action."""
    from conformance import round_policies
    from engine.round.decide import Outcome, decide
    from engine.round.dryrun import parse_round_spec
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_agent
    from engine.traits.round_policy import RoundPolicy

    policies = {}
    for name, entry in round_policies.policies().items():
        resolution = resolve_agent(entry["policy"], "main", parse_manifest(entry["manifest"]))
        policies[name] = RoundPolicy.of(resolution.tools)
    cases = fixtures.read("rounds")["cases"]
    disagree = []
    for case in cases:
        given = case["input"]
        spec, policy = parse_round_spec(given["round"]), policies[given["policy"]]
        got = decide(spec, policy, multi_action_mode=given["multi_action_mode"])
        runtime = tuple(
            tuple(
                Outcome(row["verdict"], row["code"], row["early"], row["ledger"] == "dedup")
                for row in attempt
            )
            for attempt in case["runtime"]
        )
        if got != runtime:
            disagree.append(case["id"])
    assert not disagree, f"{len(disagree)} of {len(cases)} rounds disagree: {disagree[:5]}"


def test_the_verdicts_only_path_agrees_with_the_runtime_on_every_file_writing_round() -> None:
    """``decide`` against the runtime's recorded file-writing rounds (the causality checks)."""
    from conformance.families import files
    from engine.round.decide import Outcome, decide
    from engine.round.dryrun import parse_round_spec
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_agent
    from engine.traits.round_policy import RoundPolicy

    policies = {
        name: RoundPolicy.of(
            resolve_agent(entry["policy"], "main", parse_manifest(entry["manifest"])).tools
        )
        for name, entry in files.POLICIES.items()
    }
    cases = [c for c in fixtures.read("files")["cases"] if c["input"]["kind"] == "round"]
    disagree = []
    for case in cases:
        given = case["input"]
        spec = parse_round_spec(given["round"])
        got = decide(spec, policies[given["policy"]], multi_action_mode=given["multi_action_mode"])
        runtime = tuple(
            tuple(
                Outcome(row["verdict"], row["code"], row["early"], row["ledger"] == "dedup")
                for row in attempt
            )
            for attempt in case["runtime"]
        )
        if got != runtime:
            disagree.append(case["id"])
    assert len(cases) >= 500
    assert not disagree, f"{len(disagree)} of {len(cases)} rounds disagree: {disagree[:5]}"
