"""Drift: a runtime that stops doing what its policy says (issue 13).

A recorded round names the policy it ran under (its ``policy_hash``); predicting the round under
that version and comparing, action by action, what the runtime reported with what the engine
predicts finds the runtime that was upgraded, misconfigured or runs a policy nobody published.
Only what the round's events carry is compared: an action whose verdict was never reported (an
inferred round from the KDCube bridge) is not compared on its verdict, and dedups are compared
only when the round's events can show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.catalog.multi_action import ModeSources, multi_action_mode
from engine.replay.draft_impact import parse_recorded_round
from engine.round.decide import decide_any, outcomes_by_slot
from engine.round.dryrun import AgentResolutionLike
from engine.round.round_spec import RoundSpec
from engine.traits.round_policy import RoundPolicy
from observe.domain.rounds import Assembly, assembly_outcomes, recorded_round


@dataclass(frozen=True, slots=True)
class Discrepancy:
    """One action where the runtime and the prediction disagree, in words."""

    attempt: int  # 1-based
    index: int
    tool_id: str | None
    what: str


def _name(tool_id: str | None, action: str | None) -> str:
    return tool_id or action or "the action"


def round_drift(
    key: tuple[str, str, int],
    state: Assembly,
    policy: RoundPolicy | AgentResolutionLike,
    *,
    policy_label: str,
    mode: ModeSources = ModeSources(),  # noqa: B008 - an immutable NamedTuple
    dedups_reported: bool = True,
    react_version: str = "v3",
) -> tuple[Discrepancy, ...]:
    """Every disagreement between the round as recorded and its prediction under ``policy``
    (empty: the runtime did what the policy says). ``mode``: where the multi-action mode comes
    from when the round did not report one (DESIGN §2.10 item 6); ``react_version``: the agent
    the prediction assumes (the precedence's answer for the round)."""
    found = recorded_round(key, state)
    if found is None:
        return ()
    spec = parse_recorded_round(found).spec
    chosen = multi_action_mode(spec.multi_action_mode, mode)
    if spec.exec_code_complete is not None:
        return _drift(
            state, spec, policy, policy_label, chosen, dedups_reported, None, react_version
        )
    # The events do not say whether the decision's code channel streamed complete (issue 37 §5):
    # both are predicted, and the round drifts only as far as the closer prediction says.
    complete = _drift(
        state, spec, policy, policy_label, chosen, dedups_reported, True, react_version
    )
    if not complete:
        return complete
    incomplete = _drift(
        state, spec, policy, policy_label, chosen, dedups_reported, False, react_version
    )
    return incomplete if len(incomplete) < len(complete) else complete


def _drift(
    state: Assembly,
    spec: RoundSpec,
    policy: RoundPolicy | AgentResolutionLike,
    policy_label: str,
    chosen: str,
    dedups_reported: bool,
    exec_code_complete: bool | None,
    react_version: str,
) -> tuple[Discrepancy, ...]:
    predicted = outcomes_by_slot(
        spec,
        decide_any(
            spec,
            policy,
            multi_action_mode=chosen,
            react_version=react_version,
            exec_code_complete=True if exec_code_complete is None else exec_code_complete,
        ),
    )
    drift: list[Discrepancy] = []
    for (attempt, index), action in assembly_outcomes(state).items():
        entry = predicted.get((attempt + 1, index))
        if entry is None:  # not observed, so not in the replayable round either
            continue
        _, outcome = entry
        name = _name(action.tool_id, action.action)
        place = f"(attempt {attempt + 1}, #{index})"
        words = _verdict_words(
            action.verdict,
            action.code,
            outcome.verdict,
            outcome.code,
            name=name,
            place=place,
            policy=policy_label,
        )
        if words is not None:
            drift.append(Discrepancy(attempt + 1, index, action.tool_id, words))
        recorded_dedup = action.dedup
        recorded_early = action.early and not recorded_dedup
        if recorded_early != outcome.early:
            drift.append(
                Discrepancy(
                    attempt + 1,
                    index,
                    action.tool_id,
                    f"the runtime {'started' if recorded_early else 'did not start'} {name} early"
                    f" {place}; {policy_label} predicts "
                    f"{'an early start' if outcome.early else 'no early start'}",
                )
            )
        if dedups_reported and recorded_dedup != outcome.dedup:
            drift.append(
                Discrepancy(
                    attempt + 1,
                    index,
                    action.tool_id,
                    f"the runtime {'reused' if recorded_dedup else 'did not reuse'} an earlier call"
                    f" for {name} {place}; {policy_label} predicts "
                    f"{'a ledger dedup' if outcome.dedup else 'no dedup'}",
                )
            )
    return tuple(drift)


def _verdict_words(
    recorded: str | None,
    recorded_code: str | None,
    predicted: str,
    predicted_code: str | None,
    *,
    name: str,
    place: str,
    policy: str,
) -> str | None:
    """How the recorded verdict and the prediction disagree (``None``: they do not, or the
    round never reported a verdict for the action)."""
    if recorded is None:
        return None
    was_rejected, is_rejected = recorded == "rejected", predicted == "rejected"
    if was_rejected and not is_rejected:
        return (
            f"the runtime rejected {name} {place} ({recorded_code}); {policy} predicts it is"
            " accepted"
        )
    if is_rejected and not was_rejected:
        return (
            f"the runtime accepted {name} {place}; {policy} predicts a rejection ({predicted_code})"
        )
    if was_rejected and recorded_code != predicted_code:
        return (
            f"the runtime rejected {name} {place} by {recorded_code}; {policy} predicts"
            f" {predicted_code}"
        )
    return None


def summary(discrepancies: tuple[Discrepancy, ...]) -> Mapping[str, Any]:
    """The JSON a round keeps: whether it drifted and each disagreement in words."""
    return {
        "drift": bool(discrepancies),
        "discrepancies": [
            {"attempt": d.attempt, "action_index": d.index, "tool_id": d.tool_id, "what": d.what}
            for d in discrepancies
        ],
    }
