"""What a policy change does to recorded rounds (issue 13, "Impact of a change").

Each recorded round (its attempts as the runtime streamed them: actions, tool ids, params) runs
through the dry-run engine under a *baseline* policy and a *candidate*; per action, what differs
between the two predictions is the impact: an action newly rejected (or no longer, or by another
rule), an early start gained or lost, a ledger dedup gained or lost. Nothing here reads a database:
the web and the CLI hand in rounds and a way to resolve an agent under each policy.

A recorded round is the dry-run's round file plus the agent it ran as (one JSON object per line in
``rounds.jsonl``)::

    {"agent": "main", "turn_id": "t-1", "iteration": 0, "max_actions": 2,
     "multi_action_mode": "on", "attempts": [[{"action": "call_tool", "tool_id": ..., ...}]]}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.vocabulary import DEDUP, EARLY, PREDICTED_KINDS, REJECTION
from core.vocabulary import KINDS as ROUND_KIND
from engine.catalog.multi_action import ModeSources, multi_action_mode
from engine.round.backstop import EXEC_TOOLS, multi_action_enabled
from engine.round.decide import Outcome, decide_version, outcome_of_row, outcomes_by_slot
from engine.round.dryrun import (
    AgentResolutionLike,
    RoundSpec,
    RoundSpecError,
    parse_round_spec,
)
from engine.round.overseer import STRATEGY_INCOMPATIBLE
from engine.traits.round_policy import RoundPolicy


@dataclass(frozen=True, slots=True)
class ChangeKind:
    """One kind of change: ``name`` (the key of reports, the API and the CLI's JSON), ``label``
    (how a person reads it: "3 newly rejected"), ``explained`` (what it means for the runtime, in
    one line), ``risky`` (the change lets an action run, run again or run earlier, with its side
    effects), ``risk_rank`` (0 = riskiest; how the impact page orders its groups) and
    ``by_rule`` (a rejection change: reports count it per rejection rule)."""

    name: str
    label: str
    explained: str
    risky: bool
    risk_rank: int
    by_rule: bool = False


NEWLY_REJECTED: Final = "newly_rejected"
NO_LONGER_REJECTED: Final = "no_longer_rejected"
OTHER_RULE: Final = "rejected_by_another_rule"
#: Accepted while streaming but never executed (multi-action off runs only the first action).
NEWLY_DROPPED: Final = "newly_dropped"
NO_LONGER_DROPPED: Final = "no_longer_dropped"
EARLY_GAINED: Final = "early_gained"
EARLY_LOST: Final = "early_lost"
DEDUP_GAINED: Final = "dedup_gained"
DEDUP_LOST: Final = "dedup_lost"

#: Every kind of change, in the order reports list them; everything else about kinds derives
#: from this table. Riskiest first (``risk_rank``): what now runs that did not (a lost
#: rejection, a dropped action that now runs, a duplicate that is no longer deduplicated, an
#: early start) before what now stops running.
CHANGE_KINDS: Final[tuple[ChangeKind, ...]] = (
    ChangeKind(
        NEWLY_REJECTED,
        "newly rejected",
        "the runtime now rejects the action: it does not run",
        risky=False,
        risk_rank=5,
        by_rule=True,
    ),
    ChangeKind(
        NO_LONGER_REJECTED,
        "no longer rejected",
        "the runtime rejected it; now it accepts it and the tool runs",
        risky=True,
        risk_rank=0,
        by_rule=True,
    ),
    ChangeKind(
        OTHER_RULE,
        "rejected by another rule",
        "still rejected, but by a different rule",
        risky=False,
        risk_rank=4,
        by_rule=True,
    ),
    ChangeKind(
        NEWLY_DROPPED,
        "newly dropped (accepted, never run)",
        "accepted while streaming but never run: with multi-action off the runtime runs only "
        "the first action of a round",
        risky=False,
        risk_rank=6,
    ),
    ChangeKind(
        NO_LONGER_DROPPED,
        "no longer dropped",
        "was accepted but never run; now it runs",
        risky=True,
        risk_rank=1,
    ),
    ChangeKind(
        EARLY_GAINED,
        "early starts gained",
        "now starts while the model is still generating (before the round is complete)",
        risky=True,
        risk_rank=3,
    ),
    ChangeKind(
        EARLY_LOST,
        "early starts lost",
        "no longer starts early: it runs after generation",
        risky=False,
        risk_rank=7,
    ),
    ChangeKind(
        DEDUP_GAINED,
        "dedups gained",
        "now skipped as a duplicate of an earlier call",
        risky=False,
        risk_rank=8,
    ),
    ChangeKind(
        DEDUP_LOST,
        "dedups lost",
        "was skipped as a duplicate; now it runs again",
        risky=True,
        risk_rank=2,
    ),
)
#: ``name`` → kind.
CHANGE_KIND: Final[Mapping[str, ChangeKind]] = {kind.name: kind for kind in CHANGE_KINDS}
#: The kinds' names, in the order reports list them.
KINDS: Final[tuple[str, ...]] = tuple(CHANGE_KIND)
#: How a person reads each kind.
LABELS: Final[Mapping[str, str]] = {kind.name: kind.label for kind in CHANGE_KINDS}
#: The kinds, riskiest first.
RISK_ORDER: Final[tuple[str, ...]] = tuple(
    kind.name for kind in sorted(CHANGE_KINDS, key=lambda kind: kind.risk_rank)
)
#: Kinds where the change lets an action run (or run again, or earlier) with its side effects.
RISKY_KINDS: Final[frozenset[str]] = frozenset(k.name for k in CHANGE_KINDS if k.risky)
#: What each kind means for the runtime, in one line.
EXPLAINED: Final[Mapping[str, str]] = {kind.name: kind.explained for kind in CHANGE_KINDS}
#: The rejection kinds (counted per rule).
_REJECTION_KINDS: Final[frozenset[str]] = frozenset(k.name for k in CHANGE_KINDS if k.by_rule)
# Ranks are a permutation: every kind has its own place in the risk order.
assert sorted(kind.risk_rank for kind in CHANGE_KINDS) == list(range(len(CHANGE_KINDS)))


@dataclass(frozen=True, slots=True)
class ImpactGroup:
    """The changes of one kind over the affected rounds (a round appears once per change)."""

    kind: str
    items: tuple[tuple[RoundImpact, ActionChange], ...]

    @property
    def label(self) -> str:
        return CHANGE_KIND[self.kind].label

    @property
    def explained(self) -> str:
        return CHANGE_KIND[self.kind].explained

    @property
    def risky(self) -> bool:
        return CHANGE_KIND[self.kind].risky


def impact_groups(
    affected: Iterable[RoundImpact], *, reads_only: Callable[[str, str], bool] | None = None
) -> list[ImpactGroup]:
    """The affected rounds' changes grouped by kind, riskiest kind first; a lost rejection of
    exploitation (``strategy_incompatible``: now accepted after exploration) first in its
    group, and — given ``reads_only(agent, tool_id)`` (the tool only reads, under the policy the
    change leads to) — early starts of tools that do more than read before those that only
    read."""
    by_kind: dict[str, list[tuple[RoundImpact, ActionChange]]] = {}
    for impact in affected:
        for change in impact.changes:
            by_kind.setdefault(change.kind, []).append((impact, change))
    groups = []
    for kind in RISK_ORDER:
        items = by_kind.get(kind)
        if not items:
            continue
        if kind == NO_LONGER_REJECTED:
            items.sort(key=lambda item: item[1].before.code != STRATEGY_INCOMPATIBLE)
        if kind == EARLY_GAINED and reads_only is not None:
            check = reads_only
            items.sort(key=lambda item: check(item[0].agent, item[1].tool_id or ""))
        groups.append(ImpactGroup(kind, tuple(items)))
    return groups


DROPPED: Final = "dropped"


class RecordedRoundError(ValueError):
    """A recorded round that cannot be replayed (the message says why)."""


@dataclass(frozen=True, slots=True)
class RecordedRound:
    agent: str
    spec: RoundSpec


def parse_recorded_round(data: Any) -> RecordedRound:
    """A recorded round from its JSON form, or :class:`RecordedRoundError`."""
    if not isinstance(data, Mapping):
        raise RecordedRoundError("a recorded round is a JSON object")
    agent = data.get("agent")
    if not isinstance(agent, str) or not agent:
        raise RecordedRoundError("agent must be a non-empty string")
    try:
        spec = parse_round_spec({k: v for k, v in data.items() if k != "agent"})
    except RoundSpecError as exc:
        raise RecordedRoundError(str(exc)) from exc
    return RecordedRound(agent, spec)


@dataclass(frozen=True, slots=True)
class ActionChange:
    kind: str
    attempt: int  # 1-based, as people count attempts (DESIGN §6)
    index: int
    tool_id: str | None
    before: Outcome
    after: Outcome

    @property
    def label(self) -> str:
        return LABELS[self.kind]

    @property
    def rule(self) -> str | None:
        """The rejection rule a rejection change is about (the new one, else the old one);
        ``None`` for the other kinds."""
        if self.kind not in _REJECTION_KINDS:
            return None
        return self.after.code if self.after.rejected else self.before.code


@dataclass(frozen=True, slots=True)
class RoundImpact:
    agent: str
    turn_id: str
    iteration: int
    changes: tuple[ActionChange, ...]


@dataclass
class ImpactReport:
    rounds: int = 0
    affected: list[RoundImpact] = field(default_factory=list)
    totals: Counter[str] = field(default_factory=Counter)
    per_tool: dict[str, Counter[str]] = field(default_factory=dict)
    per_agent: dict[str, Counter[str]] = field(default_factory=dict)
    #: (kind, rule) → actions, for the rejection kinds.
    per_rule: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: The react agent the predictions assumed (a round's own ``react_version`` wins) and where
    #: it came from (:func:`engine.round.react_version.react_version`'s words).
    react_version: str = "v3"
    react_version_source: str | None = None
    #: Rounds predicted per version (a round file's own version can differ).
    versions: Counter[str] = field(default_factory=Counter)

    def add(self, impact: RoundImpact) -> None:
        self.affected.append(impact)
        for change in impact.changes:
            self.totals[change.kind] += 1
            self.per_tool.setdefault(change.tool_id or "—", Counter())[change.kind] += 1
            self.per_agent.setdefault(impact.agent, Counter())[change.kind] += 1
            if change.kind in _REJECTION_KINDS:
                self.per_rule[(change.kind, change.rule or "—")] += 1

    @property
    def version_rows(self) -> list[tuple[str, int]]:
        """(react version, rounds predicted under it), by version."""
        return sorted(self.versions.items())

    @property
    def rows(self) -> list[tuple[str, str, int]]:
        """(kind, label, actions) of every kind that occurred, in :data:`KINDS` order."""
        return [(k, LABELS[k], self.totals[k]) for k in KINDS if self.totals[k]]

    def summary(self) -> str:
        """One line: "3 of 1,000 rounds change: 2 newly rejected, 1 early starts lost"."""
        parts = [f"{self.totals[k]:,} {LABELS[k]}" for k in KINDS if self.totals[k]]
        head = f"{len(self.affected):,} of {self.rounds:,} rounds change"
        return f"{head}: {', '.join(parts)}" if parts else f"{head}"

    def as_json(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "react_version": self.react_version,
            "react_version_source": self.react_version_source,
            "rounds_by_react_version": dict(sorted(self.versions.items())),
            "affected_rounds": len(self.affected),
            "totals": {k: self.totals[k] for k in KINDS},
            "per_agent": {a: _kinds(c) for a, c in sorted(self.per_agent.items())},
            "per_tool": {t: _kinds(c) for t, c in sorted(self.per_tool.items())},
            "per_rule": [
                {"kind": kind, "rule": rule, "actions": n}
                for (kind, rule), n in sorted(self.per_rule.items())
            ],
            "affected": [_round_json(r) for r in self.affected],
        }


def _kinds(counts: Counter[str]) -> dict[str, int]:
    return {k: counts[k] for k in KINDS if counts[k]}


def _outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "verdict": outcome.verdict,
        "code": outcome.code,
        "early": outcome.early,
        "dedup": outcome.dedup,
    }


def _round_json(impact: RoundImpact) -> dict[str, Any]:
    return {
        "agent": impact.agent,
        "turn_id": impact.turn_id,
        "iteration": impact.iteration,
        "changes": [
            {
                "kind": c.kind,
                "attempt": c.attempt,
                "action_index": c.index,
                "tool_id": c.tool_id,
                "rule": c.rule,
                "before": _outcome_json(c.before),
                "after": _outcome_json(c.after),
            }
            for c in impact.changes
        ],
    }


def outcomes(result: Mapping[str, Any]) -> dict[tuple[int, int], tuple[str | None, Outcome]]:
    """(attempt, action index) → (tool id, outcome) of a dry-run result; attempts 1-based."""
    found: dict[tuple[int, int], tuple[str | None, Outcome]] = {}
    for number, attempt in enumerate(result["attempts"], start=1):
        for row in attempt["actions"]:
            found[(number, row["index"])] = (row.get("tool_id"), outcome_of_row(row))
    return found


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[ActionChange, ...]:
    """What differs, action by action, between two dry-runs of the same round."""
    return changes_between(outcomes(before), outcomes(after))


Outcomes = Mapping[tuple[int, int], tuple[str | None, Outcome]]


def changes_between(old: Outcomes, new: Outcomes) -> tuple[ActionChange, ...]:
    """What differs, action by action, between two predictions of the same round (each as
    :func:`outcomes` or :func:`~engine.round.decide.outcomes_by_slot` gives it)."""
    # The engine gives every streamed action a row (``not_observed`` included): both runs of a
    # round have the same (attempt, index) keys.
    found: list[ActionChange] = []
    for key, (tool_id, was) in old.items():
        now = new[key][1]
        if was == now:
            continue
        kinds: list[str] = []
        if now.rejected and not was.rejected:
            kinds.append(NEWLY_REJECTED)
        elif was.rejected and not now.rejected:
            kinds.append(NO_LONGER_REJECTED)
        elif was.rejected and now.rejected and was.code != now.code:
            kinds.append(OTHER_RULE)
        elif was.verdict != now.verdict and DROPPED in (was.verdict, now.verdict):
            kinds.append(NEWLY_DROPPED if now.verdict == DROPPED else NO_LONGER_DROPPED)
        if now.early != was.early:
            kinds.append(EARLY_GAINED if now.early else EARLY_LOST)
        if now.dedup != was.dedup:
            kinds.append(DEDUP_GAINED if now.dedup else DEDUP_LOST)
        found.extend(ActionChange(k, key[0], key[1], tool_id, was, now) for k in kinds)
    return tuple(found)


#: An agent's policy under one side of the comparison (``None``: the side has no such agent and
#: no default to fall back to, so the round is predicted with no tools at all).
Resolver = Callable[[str], RoundPolicy | AgentResolutionLike | None]
#: Where one side's multi-action mode comes from for an agent, for rounds that did not record one
#: (all ``None``: ``off``, as the runtime's default).
ModeFor = Callable[[str], ModeSources]

_NO_TOOLS: Final = RoundPolicy.of(())
_NO_SOURCES: Final = ModeSources()


class _Policies:
    """Each agent's round policy under one side, resolved once."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.cache: dict[str, RoundPolicy] = {}

    def __call__(self, agent: str) -> RoundPolicy:
        found = self.cache.get(agent)
        if found is None:
            resolved = self.resolver(agent)
            if resolved is None:
                found = _NO_TOOLS
            elif isinstance(resolved, RoundPolicy):
                found = resolved
            else:
                found = RoundPolicy.of(resolved.tools)
            self.cache[agent] = found
        return found


def _differing(before: RoundPolicy, after: RoundPolicy) -> frozenset[str]:
    """The tool ids whose traits or namespace overrides differ between two round policies."""
    ids = {*before.traits_by_id, *after.traits_by_id}
    ids |= {*before.overrides_by_id, *after.overrides_by_id}
    return frozenset(
        tool
        for tool in ids
        if before.traits_by_id.get(tool) != after.traits_by_id.get(tool)
        or before.overrides_by_id.get(tool) != after.overrides_by_id.get(tool)
    )


def _off(agent: str) -> ModeSources:
    return _NO_SOURCES


def replay(
    rounds: Iterable[RecordedRound],
    *,
    candidate: Resolver,
    baseline: Resolver,
    candidate_mode: ModeFor = _off,
    baseline_mode: ModeFor = _off,
    progress: Callable[[int], None] | None = None,
    every: int = 1000,
    react_version: str = "v3",
    version_source: str | None = None,
) -> ImpactReport:
    """Replay every round under both sides; a round whose predictions differ is *affected*.

    A round's own ``multi_action_mode`` wins over the side's (so a mode difference is never
    mistaken for a policy change). ``progress`` is called with the number of rounds done every
    ``every`` rounds; it may raise to cancel. ``react_version``: the agent both sides are
    predicted under (:func:`decide_version`), unless a round says its own."""
    report = ImpactReport(react_version=react_version, react_version_source=version_source)
    before_policy, after_policy = _Policies(baseline), _Policies(candidate)
    differing: dict[str, frozenset[str]] = {}
    for recorded in rounds:
        spec, agent = recorded.spec, recorded.agent
        report.rounds += 1
        version = spec.react_version or react_version
        report.versions[version] += 1
        before_mode = multi_action_mode(spec.multi_action_mode, baseline_mode(agent))
        after_mode = multi_action_mode(spec.multi_action_mode, candidate_mode(agent))
        changed = differing.get(agent)
        if changed is None:
            changed = differing[agent] = _differing(before_policy(agent), after_policy(agent))
        if multi_action_enabled(before_mode) == multi_action_enabled(after_mode) and not any(
            action.tool in changed or action.tool_id in changed
            for attempt in spec.attempts
            for action in attempt
        ):
            # The engine reads a policy only through the traits of the round's own tools (and
            # whether they exist): equal for all of them, the two predictions are equal too.
            if progress is not None and report.rounds % every == 0:
                progress(report.rounds)
            continue
        # Verdicts, rules, early starts and dedups are all a change can alter: the
        # verdicts-only path answers them without the dry-run's words.
        found: list[ActionChange] = []
        for complete in _code_channels(spec):
            before = decide_version(
                spec,
                before_policy(agent),
                multi_action_mode=before_mode,
                react_version=version,
                exec_code_complete=complete,
            )
            after = decide_version(
                spec,
                after_policy(agent),
                multi_action_mode=after_mode,
                react_version=version,
                exec_code_complete=complete,
            )
            if before != after:
                between = changes_between(
                    outcomes_by_slot(spec, before), outcomes_by_slot(spec, after)
                )
                found += [change for change in between if change not in found]
        if found:
            report.add(RoundImpact(agent, spec.turn_id, spec.iteration, tuple(found)))
        if progress is not None and report.rounds % every == 0:
            progress(report.rounds)
    return report


def _code_channels(spec: RoundSpec) -> tuple[bool, ...]:
    """The code-channel assumptions a recorded round is replayed under (issue 37 §5): its own
    ``exec_code_complete`` when the events carried it; else both, when its last attempt has a
    code-execution call among other actions (the only place it matters), else the default."""
    if spec.exec_code_complete is not None:
        return (spec.exec_code_complete,)
    last = spec.attempts[-1] if spec.attempts else ()
    if len(last) > 1 and any(action.tool in EXEC_TOOLS for action in last):
        return (True, False)
    return (True,)


def predict(
    rounds: Iterable[RecordedRound],
    *,
    policy: Resolver,
    mode: ModeFor = _off,
    react_version: str = "v3",
    version_source: str | None = None,
) -> dict[str, Any]:
    """What one policy predicts for the rounds, in totals (``traitdeck replay`` without a
    baseline): rounds, final actions, rejections by rule, early starts, dedups, under
    ``react_version`` unless a round says its own."""
    policies = _Policies(policy)
    rounds_seen = actions = early = dedup = 0
    rejected: Counter[str] = Counter()
    with_kind: Counter[str] = Counter()
    versions: Counter[str] = Counter()
    for recorded in rounds:
        spec, agent = recorded.spec, recorded.agent
        chosen = multi_action_mode(spec.multi_action_mode, mode(agent))
        version = spec.react_version or react_version
        versions[version] += 1
        decision = decide_version(
            spec, policies(agent), multi_action_mode=chosen, react_version=version
        )
        rounds_seen += 1
        kinds: set[str] = set()
        for outcome in (outcome for attempt in decision for outcome in attempt):
            actions += 1
            if outcome.rejected:
                rejected[outcome.code or "—"] += 1
                kinds.add(REJECTION)
            if outcome.early:
                early += 1
                kinds.add(EARLY)
            if outcome.dedup:
                dedup += 1
                kinds.add(DEDUP)
        with_kind.update(kinds)
    return {
        "rounds": rounds_seen,
        "actions": actions,
        "rejected": dict(sorted(rejected.items())),
        ROUND_KIND[EARLY].counter: early,
        ROUND_KIND[DEDUP].counter: dedup,
        "rounds_with": {k: with_kind[k] for k in PREDICTED_KINDS},
        "react_version": react_version,
        "react_version_source": version_source,
        "rounds_by_react_version": dict(sorted(versions.items())),
    }


def prediction_summary(prediction: Mapping[str, Any]) -> str:
    rejected = prediction["rejected"]
    rules = ", ".join(f"{rule} {n:,}" for rule, n in rejected.items())
    rejections = f"{sum(rejected.values()):,} rejected" + (f" ({rules})" if rules else "")
    return (
        f"{prediction['rounds']:,} rounds, {prediction['actions']:,} actions: {rejections}, "
        f"{prediction['early_starts']:,} early starts, {prediction['dedups']:,} dedups"
    )


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{counts[k]:,} {LABELS[k]}" for k in KINDS if counts[k])


def version_line(version: str, source: str | None) -> str:
    """The text output's line naming the react agent a prediction assumed."""
    where = f" (from {source})" if source else ""
    return f"react agent assumed: {version}{where}; a round's own react_version wins"


def describe_report(report: ImpactReport) -> list[str]:
    """The report as text: the summary, per agent, per tool, per rule, then every change."""
    lines = [report.summary(), version_line(report.react_version, report.react_version_source)]
    if not report.affected:
        return lines
    lines += [f"  agent {agent}: {_counts(c)}" for agent, c in sorted(report.per_agent.items())]
    lines += [f"  tool {tool}: {_counts(c)}" for tool, c in sorted(report.per_tool.items())]
    lines += [
        f"  {LABELS[kind]} by {rule}: {n:,}" for (kind, rule), n in sorted(report.per_rule.items())
    ]
    for impact in report.affected:
        for change in impact.changes:
            rule = f" ({change.rule})" if change.rule else ""
            lines.append(
                f"{impact.agent} {impact.turn_id}/{impact.iteration} attempt {change.attempt}"
                f" #{change.index} {change.tool_id or '—'}: {LABELS[change.kind]}{rule}"
            )
    return lines
