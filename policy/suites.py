"""Regression suites in the store (issue 13): cases per agent, checked against the draft.

The engine part is :mod:`policy.domain.suites`; here the cases live in the database, a case is
saved from a recorded or playground round with what the draft predicts for it now, the draft is
checked on demand (the agent page, the suite page, publishing), and every change is audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from audit.services import audit_record
from core.text import counted
from engine.catalog.multi_action import multi_action_mode
from engine.round.decide import decide_any, outcomes_by_slot
from engine.round.dryrun import parse_round_spec
from engine.round.react_version import VersionSources, react_version
from policy.domain.suites import (
    Case,
    CaseResult,
    Suite,
    SuiteError,
    case_from_outcomes,
    case_size_error,
    parse_suite,
    run_suite,
)
from policy.models import SuiteCase
from policy.selectors import (
    DraftState,
    agent_default_mode,
    draft_state,
    policy_agent_run,
)


class CaseRefused(ValueError):
    """A case that cannot be saved as asked (the message says why)."""


@dataclass(frozen=True)
class AgentSuiteResult:
    agent: str
    results: tuple[CaseResult, ...]
    #: The agent is not in the draft (nor is a default agent): nothing could run.
    missing: bool = False
    #: The react agent the cases ran under (a case's own ``react_version`` wins).
    react_version: str = "v3"

    @property
    def failing(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.results if not r.passed)


def suite_of(agent: str) -> Suite:
    rows = SuiteCase.objects.filter(agent=agent)
    return parse_suite(
        {
            "agent": agent,
            "cases": [{"name": r.name, "round": r.round, "expect": r.expect} for r in rows],
        }
    )


def suite_agents() -> list[str]:
    return list(SuiteCase.objects.order_by("agent").values_list("agent", flat=True).distinct())


def suite_check(agent: str, state: DraftState | None = None) -> AgentSuiteResult:
    """The agent's cases under the draft."""
    data = (state or draft_state()).data
    suite = suite_of(agent)
    resolution = policy_agent_run(data, agent).resolution
    mode = agent_default_mode(data, agent)
    version = _assumed_version()
    results = run_suite(suite, resolution, mode=mode, react_version=version)
    return AgentSuiteResult(agent, results, react_version=version)


def _assumed_version() -> str:
    """The react agent the instance assumes (the setting, else KDCube's default v2)."""
    return react_version(VersionSources(setting=settings.TRAITDECK_REACT_AGENT_VERSION))[0]


def suites_check(state: DraftState | None = None) -> list[AgentSuiteResult]:
    state = state or draft_state()
    return [suite_check(agent, state) for agent in suite_agents()]


def failing_summary(results: list[AgentSuiteResult]) -> list[str]:
    """One line per failing case (or agent the draft no longer has), for refusals and audit."""
    lines = []
    for result in results:
        if result.missing:
            lines.append(f"{result.agent}: the draft has no such agent (its cases cannot run)")
        lines += [f"{result.agent}: {case.name}: {case.failures[0]}" for case in result.failing]
    return lines


def case_save(*, agent: str, name: str, round_data: Mapping[str, Any], actor: Any) -> Case:
    """Save a round as a case that pins what the draft predicts for it now."""
    name = name.strip()
    if not name:
        raise CaseRefused("A case needs a name: say what it guards.")
    if len(name) > 200:
        raise CaseRefused("A case name is at most 200 characters.")
    data = dict(round_data)
    data.pop("agent", None)
    if not data.get("react_version"):
        # The case pins what the draft predicts under the agent assumed now, and keeps it.
        data["react_version"] = _assumed_version()
    too_large = case_size_error(data)
    if too_large is not None:
        raise CaseRefused(f"The round cannot be a case: {too_large}.")
    try:
        spec = parse_round_spec(data)
    except ValueError as exc:
        raise CaseRefused(f"The round cannot be a case: {exc}") from None
    draft = draft_state().data
    resolution = policy_agent_run(draft, agent).resolution
    mode = multi_action_mode(spec.multi_action_mode, agent_default_mode(draft, agent))
    # Pinned by the same path run_suite checks the case with.
    decision = decide_any(
        spec, resolution, multi_action_mode=mode, react_version=spec.react_version or "v3"
    )
    case = case_from_outcomes(name, data, outcomes_by_slot(spec, decision))
    item = case.as_dict()
    too_large = case_size_error(item)
    if too_large is not None:
        raise CaseRefused(f"The round cannot be a case: {too_large}.")
    try:
        with transaction.atomic():
            _store_case(agent, item, actor)
            audit_record(
                actor=actor,
                action="suite.case_add",
                target=f"suite {agent}",
                message=name,
                after=item,
            )
    except IntegrityError:
        raise CaseRefused(f"The suite of {agent} already has a case named {name!r}.") from None
    return case


def _store_case(agent: str, item: Mapping[str, Any], actor: Any) -> None:
    """One case row, from the case's dict form (name, round, expect)."""
    SuiteCase.objects.create(
        agent=agent,
        name=item["name"],
        round=item["round"],
        expect=item["expect"],
        created_by=actor if getattr(actor, "pk", None) else None,
    )


@transaction.atomic
def case_remove(*, agent: str, name: str, actor: Any) -> bool:
    found = SuiteCase.objects.filter(agent=agent, name=name).first()
    if found is None:
        return False
    before = {"name": found.name, "round": found.round, "expect": found.expect}
    found.delete()
    audit_record(
        actor=actor,
        action="suite.case_remove",
        target=f"suite {agent}",
        message=name,
        before=before,
        after=None,
    )
    return True


@transaction.atomic
def suite_replace(*, agent: str, data: Any, actor: Any) -> Suite:
    """Replace the agent's suite by an imported one (``SuiteError`` names a bad field)."""
    suite = parse_suite(data)
    if suite.agent != agent:
        raise SuiteError(f"agent: this suite is for {suite.agent!r}, not {agent!r}")
    before = suite_of(agent).as_dict()
    SuiteCase.objects.filter(agent=agent).delete()
    for case in suite.cases:
        _store_case(agent, case.as_dict(), actor)
    audit_record(
        actor=actor,
        action="suite.import",
        target=f"suite {agent}",
        message=counted(len(suite.cases), "case"),
        before=before,
        after=suite.as_dict(),
    )
    return suite
