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
