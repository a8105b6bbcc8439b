"""The dry-run's verdicts without its words: per streamed action, only what the runtime does
(verdict, rejection code, early start, ledger dedup), for the bulk users that read nothing else —
the impact replay over a window of recorded rounds, drift checks after every stored batch, and
suites.

It reads the four facts off :func:`engine.round.engine.run`, the engine the dry-run renders in
words too: one reading of the runtime's rules for both (``make test-conformance`` holds both to
the runtime's recorded answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.round.backstop import multi_action_enabled
from engine.round.engine import ACCEPTED, DROPPED, NOT_OBSERVED, REJECTED, Row, run
from engine.round.react_v2 import run_v2
from engine.round.round_spec import RoundSpec
from engine.traits.round_policy import RoundPolicy


@dataclass(frozen=True, slots=True)
class Outcome:
    """The facts of one predicted action that a policy change can alter."""

    verdict: str
    code: str | None
    early: bool
    dedup: bool

    @property
    def rejected(self) -> bool:
        return self.verdict == "rejected"


#: v2: an attempt after the turn ran a tool or ended (the dry-run's ``not_reached`` verdict).
NOT_REACHED: Final = "not_reached"

#: Per attempt, per streamed action (in stream order): its outcome.
Decision = tuple[tuple[Outcome, ...], ...]

_OUTCOMES: dict[tuple[str, str | None, bool, bool], Outcome] = {}
#: A handful of distinct outcomes cover nearly every round; a code can carry an action word
#: (``invalid_action:…``), so what is kept stays bounded.
_MAX_SHARED: Final = 256


def _outcome(verdict: str, code: str | None, early: bool, dedup: bool) -> Outcome:
    # Each common outcome is made once and shared.
    key = (verdict, code, early, dedup)
    found = _OUTCOMES.get(key)
    if found is None:
        found = Outcome(verdict, code, early, dedup)
        if len(_OUTCOMES) < _MAX_SHARED:
            _OUTCOMES[key] = found
    return found


def outcome_of(row: Row) -> Outcome:
    """The outcome of one row of the engine."""
    found = _BY_ROW.get((row.verdict, row.code, row.early, row.ledger))
    if found is None:
        found = _outcome(row.verdict, row.code, row.early, row.ledger == "dedup")
        if len(_BY_ROW) < _MAX_SHARED:
            _BY_ROW[(row.verdict, row.code, row.early, row.ledger)] = found
    return found


#: The outcome of a row with no code, no early start and no ledger record (most rows), by verdict.
_PLAIN: Final = {
    verdict: _outcome(verdict, None, False, False)
    for verdict in (ACCEPTED, REJECTED, NOT_OBSERVED, DROPPED)
}

#: The runtime's reading of each mode string seen (a handful recur).
_ENABLED: dict[str, bool] = {}
_BY_ROW: dict[tuple[str, str | None, bool, str | None], Outcome] = {}


def outcome_of_row(row: Mapping[str, Any]) -> Outcome:
    """The outcome of one action row of a dry-run result (its JSON)."""
    return _outcome(
        row["verdict"], row.get("code"), bool(row.get("early")), row.get("ledger") == "dedup"
    )


def decide(
    spec: RoundSpec,
    policy: RoundPolicy,
    *,
    multi_action_mode: str = "off",
    exec_code_complete: bool = True,
) -> Decision:
    """Each streamed action's outcome under ``policy``, as :func:`dry_run` gives it
    (``exec_code_complete`` as there)."""
    multi = _ENABLED.get(multi_action_mode)
    if multi is None:
        multi = multi_action_enabled(multi_action_mode)
        if len(_ENABLED) < _MAX_SHARED:
            _ENABLED[multi_action_mode] = multi
    attempts = run(spec, policy, multi, exec_code_complete).rows
    if len(attempts) == 1:  # (most rounds: no tuple of a list of attempts)
        return (_outcomes(attempts[0]),)
    return tuple([_outcomes(rows) for rows in attempts])


def _outcomes(rows: list[Row]) -> tuple[Outcome, ...]:
    return tuple(
        [
            _PLAIN[row.verdict]
            if row.code is None and row.ledger is None and not row.early
            else outcome_of(row)
            for row in rows
        ]
    )


def outcomes_by_slot(
    spec: RoundSpec, decision: Decision
) -> dict[tuple[int, int], tuple[str | None, Outcome]]:
    """(attempt, action index) → (tool id, outcome), attempts 1-based (the shape
    :func:`engine.replay.draft_impact.outcomes` gives for a full dry-run)."""
    return {
        (number, index): (None if action.is_final else action.tool_id, outcome)
        for number, (actions, outcomes) in enumerate(zip(spec.attempts, decision, strict=True), 1)
        for index, (action, outcome) in enumerate(zip(actions, outcomes, strict=True))
    }


def decide_v2(spec: RoundSpec, policy: RoundPolicy) -> Decision:
    """Each streamed action's outcome under KDCube's **v2** agent, as :func:`dry_run_v2` gives it
    (:mod:`engine.round.react_v2`): per attempt (one answer of the model), the call that runs or
    the final answer ``accepted``, every action of a decision that fails v2's protocol
    ``rejected`` with its first notice, and ``not_reached`` after the turn ran a tool or ended.
    No early start and no dedup under v2."""
    decisions = run_v2(spec.attempts, frozenset(policy.traits_by_id), iteration=spec.iteration)
    out: list[tuple[Outcome, ...]] = []
    for number, actions in enumerate(spec.attempts):
        decision = decisions[number] if number < len(decisions) else None
        if decision is None:
            outcome = _outcome(NOT_REACHED, None, False, False)
        elif decision.route == "tool_execution" or (
            decision.route == "exit" and not decision.notices
        ):
            outcome = _PLAIN[ACCEPTED]
        else:
            code = decision.notices[0] if decision.notices else (decision.exit or "")
            outcome = _outcome(REJECTED, code, False, False)
        out.append(tuple(outcome for _ in actions))
    return tuple(out)


def decide_version(
    spec: RoundSpec,
    policy: RoundPolicy,
    *,
    multi_action_mode: str = "off",
    react_version: str,
    exec_code_complete: bool = True,
) -> Decision:
    """:func:`decide` under ``v3``, :func:`decide_v2` under ``v2`` (the version the precedence of
    :mod:`engine.round.react_version` gives). v2 has no post-generation backstop, so the code
    channel's completeness matters only under v3."""
    if react_version == "v2":
        return decide_v2(spec, policy)
    return decide(
        spec, policy, multi_action_mode=multi_action_mode, exec_code_complete=exec_code_complete
    )


def decide_any(
    spec: RoundSpec,
    policy: Any,
    *,
    multi_action_mode: str = "off",
    react_version: str = "v3",
    exec_code_complete: bool = True,
) -> Decision:
    """:func:`decide_version` for a round policy or anything with ``tools`` (an agent
    resolution)."""
    if not isinstance(policy, RoundPolicy):
        policy = RoundPolicy.of(policy.tools)
    return decide_version(
        spec,
        policy,
        multi_action_mode=multi_action_mode,
        react_version=react_version,
        exec_code_complete=exec_code_complete,
    )
