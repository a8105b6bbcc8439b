"""Policy regression suites (issue 13): rounds saved with the verdicts they must get.

A suite belongs to one agent and holds cases; a case is a round (the dry-run's round file) and,
per action, what it must get: ``verdict`` (``accepted``, ``rejected``, ``dropped``,
``not_observed``), ``rule`` (a rejected action's code), ``early`` and ``dedup`` (booleans). A field
left out is not checked. As YAML (``traitdeck test POLICY SUITE.yaml`` runs it)::

    agent: main
    cases:
      - name: an export may not follow a search
        round:
          turn_id: t-1
          iteration: 0
          max_actions: 3
          attempts:
            - - {action: call_tool, tool_id: workspace_jobs.search, params: {q: x}}
              - {action: call_tool, tool_id: workspace_jobs.export_report, params: {}}
        expect:
          - attempt: 1
            index: 1
            verdict: rejected
            rule: multi_action_bundle_strategy_incompatible
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from core.json_limits import nests_deeper
from core.text import counted
from core.vocabulary import MAX_DEPTH
from engine.catalog.multi_action import ModeSources, multi_action_mode
from engine.document.diagnostics import Severity
from engine.round.decide import Outcome, decide_version, outcomes_by_slot
from engine.round.dryrun import (
    AgentResolutionLike,
    RoundSpec,
    RoundSpecError,
    parse_round_spec,
)
from engine.traits.round_policy import RoundPolicy
from policy.domain.yaml_io import WEB_MAX_BYTES, load_document

VERDICTS: Final = ("accepted", "rejected", "dropped", "not_observed")
#: The most JSON one stored case (name, round, expectations) may take: every page that lists
#: the suite and every draft check reads them all (a 540-byte alias bomb once stored 312 MB).
MAX_CASE_BYTES: Final = 64 * 1024
_EXPECT_KEYS: Final = frozenset({"attempt", "index", "verdict", "rule", "early", "dedup"})


class SuiteError(ValueError):
    """A suite that cannot be run; the message names the bad field by its path."""


@dataclass(frozen=True)
class Expectation:
    attempt: int  # 1-based
    index: int
    verdict: str | None = None
    rule: str | None = None
    early: bool | None = None
    dedup: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"attempt": self.attempt, "index": self.index}
        for key in ("verdict", "rule", "early", "dedup"):
            value = getattr(self, key)
            if value is not None:
                found[key] = value
        return found


@dataclass(frozen=True)
class Case:
    name: str
    round: Mapping[str, Any]
    spec: RoundSpec
    expect: tuple[Expectation, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "round": dict(self.round),
            "expect": [e.as_dict() for e in self.expect],
        }


@dataclass(frozen=True)
class Suite:
    agent: str
    cases: tuple[Case, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "cases": [case.as_dict() for case in self.cases]}


@dataclass(frozen=True)
class CaseResult:
    name: str
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


def _fail(path: str, message: str) -> SuiteError:
    return SuiteError(f"{path}: {message}")


def _int(value: Any, path: str, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _fail(path, f"must be a whole number, at least {least}")
    return value


def parse_expectation(data: Any, path: str) -> Expectation:
    if not isinstance(data, Mapping):
        raise _fail(path, "must be a mapping")
    unknown = sorted(str(key) for key in data if key not in _EXPECT_KEYS)
    if unknown:
        raise _fail(f"{path}.{unknown[0]}", f"is not one of {', '.join(sorted(_EXPECT_KEYS))}")
    verdict = data.get("verdict")
    if verdict is not None and verdict not in VERDICTS:
        raise _fail(f"{path}.verdict", f"must be one of {', '.join(VERDICTS)}")
    rule = data.get("rule")
    if rule is not None and not isinstance(rule, str):
        raise _fail(f"{path}.rule", "must be a string")
    flags = {}
    for key in ("early", "dedup"):
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            raise _fail(f"{path}.{key}", "must be true or false")
        flags[key] = value
    return Expectation(
        attempt=_int(data.get("attempt", 1), f"{path}.attempt", least=1),
        index=_int(data.get("index"), f"{path}.index", least=0),
        verdict=verdict,
        rule=rule,
        **flags,
    )


def case_size_error(data: Mapping[str, Any]) -> str | None:
    """Why a case is too large or too deep to be stored, in words, or ``None``."""
    if nests_deeper(data, MAX_DEPTH):
        return f"it nests more than {MAX_DEPTH} levels deep"
    size = len(json.dumps(data, ensure_ascii=False, default=str).encode())
    if size > MAX_CASE_BYTES:
        return f"it takes {size:,} bytes as JSON; a case holds at most {MAX_CASE_BYTES:,}"
    return None


def parse_case(data: Any, path: str) -> Case:
    if not isinstance(data, Mapping):
        raise _fail(path, "must be a mapping")
    too_large = case_size_error(data)
    if too_large is not None:
        raise _fail(path, too_large)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _fail(f"{path}.name", "must be a non-empty string")
    raw_round = data.get("round")
    if not isinstance(raw_round, Mapping):
        raise _fail(f"{path}.round", "must be a mapping (a dry-run round)")
    try:
        spec = parse_round_spec(raw_round)
    except RoundSpecError as exc:
        raise _fail(f"{path}.round", str(exc)) from None
    expect = data.get("expect")
    if not isinstance(expect, list) or not expect:
        raise _fail(f"{path}.expect", "must be a non-empty list of expected actions")
    return Case(
        name=name.strip(),
        round=dict(raw_round),
        spec=spec,
        expect=tuple(parse_expectation(e, f"{path}.expect[{i}]") for i, e in enumerate(expect)),
    )


def parse_suite(data: Any) -> Suite:
    if not isinstance(data, Mapping):
        raise SuiteError("a suite is a mapping with agent and cases")
    agent = data.get("agent")
    if not isinstance(agent, str) or not agent:
        raise _fail("agent", "must be a non-empty string")
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise _fail("cases", "must be a list")
    parsed = tuple(parse_case(case, f"cases[{i}]") for i, case in enumerate(cases))
    names = [case.name for case in parsed]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise _fail("cases", f"two cases are named {repeated[0]!r}")
    return Suite(agent, parsed)


def load_suite(text: str | bytes, *, max_bytes: int = WEB_MAX_BYTES) -> Suite:
    """Read a suite through the bounded YAML loader (size, depth and alias expansion)."""
    loaded = load_document(text, max_bytes=max_bytes)
    if loaded.refused:
        first = next(d for d in loaded.diagnostics if d.severity is Severity.ERROR)
        where = f" (line {first.line})" if first.line else ""
        raise SuiteError(f"not YAML{where}: {first.message}")
    return parse_suite(loaded.data)


def dump_suite(suite: Suite) -> str:
    return yaml.safe_dump(suite.as_dict(), sort_keys=False, allow_unicode=True, width=100)


def _describe(outcome: Outcome) -> str:
    return outcome.verdict + (f" ({outcome.code})" if outcome.rejected and outcome.code else "")


def check_case(
    case: Case, predicted: Mapping[tuple[int, int], tuple[str | None, Outcome]]
) -> tuple[str, ...]:
    """What the prediction gets wrong, in words (empty: the case passes)."""
    failures: list[str] = []
    for want in case.expect:
        where = f"attempt {want.attempt} #{want.index}"
        found = predicted.get((want.attempt, want.index))
        if found is None:
            failures.append(f"{where}: the round has no such action")
            continue
        tool_id, got = found
        name = f"{where} {tool_id or ''}".rstrip()
        if want.verdict is not None and got.verdict != want.verdict:
            failures.append(f"{name}: expected {want.verdict}, got {_describe(got)}")
        elif want.rule is not None and (not got.rejected or got.code != want.rule):
            failures.append(f"{name}: expected rejection by {want.rule}, got {_describe(got)}")
        if want.early is not None and got.early != want.early:
            failures.append(f"{name}: expected {'an' if want.early else 'no'} early start")
        if want.dedup is not None and got.dedup != want.dedup:
            failures.append(f"{name}: expected {'a' if want.dedup else 'no'} ledger dedup")
    return tuple(failures)


def run_suite(
    suite: Suite,
    policy: RoundPolicy | AgentResolutionLike,
    *,
    mode: ModeSources = ModeSources(),  # noqa: B008 - an immutable NamedTuple
    react_version: str = "v3",
) -> tuple[CaseResult, ...]:
    """Every case run through the engine under ``policy`` (the suite's agent's), its round's own
    multi-action mode winning over ``mode`` and its own ``react_version`` over
    ``react_version``."""
    round_policy = policy if isinstance(policy, RoundPolicy) else RoundPolicy.of(policy.tools)
    results = []
    for case in suite.cases:
        spec = case.spec
        chosen = multi_action_mode(spec.multi_action_mode, mode)
        decision = decide_version(
            spec,
            round_policy,
            multi_action_mode=chosen,
            react_version=spec.react_version or react_version,
        )
        results.append(CaseResult(case.name, check_case(case, outcomes_by_slot(spec, decision))))
    return tuple(results)


def case_from_outcomes(
    name: str,
    round_data: Mapping[str, Any],
    got: Mapping[tuple[int, int], tuple[str | None, Outcome]],
) -> Case:
    """A case that pins what a round got (its recorded or predicted outcomes): every action's
    verdict, rule, early start and dedup."""
    expect = tuple(
        Expectation(
            attempt=attempt,
            index=index,
            verdict=outcome.verdict,
            rule=outcome.code if outcome.rejected else None,
            early=outcome.early,
            dedup=outcome.dedup,
        )
        for (attempt, index), (_, outcome) in sorted(got.items())
    )
    data = {k: v for k, v in round_data.items() if k != "agent"}
    return Case(name=name, round=data, spec=parse_round_spec(data), expect=expect)


def summary(results: Sequence[CaseResult]) -> str:
    failing = [r for r in results if not r.passed]
    if not failing:
        return f"{counted(len(results), 'case')}, all pass"
    return f"{len(failing)} of {len(results)} case(s) fail"
