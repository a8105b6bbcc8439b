"""One round assembled from its events (DESIGN §4): the timeline the live view and the API show.

Events arrive out of order and more than once, so assembly never depends on arrival order: the
events are de-duplicated by ``event_id`` and applied in one total order, ``(ts, event_id)``. Where
two distinct events disagree (two ``round.finished``, say) the later one in that order wins —
except ``round.started``, where the earliest marks the start. The same set of events therefore
always gives an equal :class:`Round`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from observe.domain.events import (
    ACTION_ACCEPTED,
    ACTION_EVENT_TYPES,
    ACTION_OBSERVED,
    ACTION_REJECTED,
    GENERATION_FINISHED,
    LEDGER_DEDUP,
    ROUND_FINISHED,
    ROUND_STARTED,
    TOOL_EARLY_STARTED,
    TOOL_FINISHED,
    TOOL_STARTED,
    TOOL_TIMEOUT,
    Event,
    format_ts,
)
from policy.domain.overseer import explain_rejection

#: Kinds a round can show (``Round.has``), each with the event type that marks it.
KIND_EVENTS: Final[Mapping[str, str]] = {
    "rejection": ACTION_REJECTED,
    "early": TOOL_EARLY_STARTED,
    "dedup": LEDGER_DEDUP,
    "timeout": TOOL_TIMEOUT,
}
#: ``counts`` keys (besides ``actions``), each with the event type it counts.
COUNT_EVENTS: Final[Mapping[str, str]] = {
    "rejections": ACTION_REJECTED,
    "early_starts": TOOL_EARLY_STARTED,
    "dedups": LEDGER_DEDUP,
    "timeouts": TOOL_TIMEOUT,
}


@dataclass(frozen=True)
class Dedup:
    """The ledger found this call already started in the round: it reused the original call."""

    original_action_index: int
    match: str
    fingerprint: str


@dataclass(frozen=True)
class Timeout:
    limit_ms: float
    elapsed_ms: float
    async_alternative: str | None


@dataclass(frozen=True)
class RoundAction:
    """One streamed action of one attempt, with everything its events said about it.

    ``action`` is ``None`` until its ``action.observed`` arrives. ``status`` is ``ok`` or ``error``
    from ``tool.finished``, or ``timeout`` when the call only timed out. ``early`` is True for a
    call the runtime treated as early-eligible (it started early, or the ledger deduplicated it).
    """

    index: int
    action: str | None = None
    tool_id: str | None = None
    verdict: str | None = None
    code: str | None = None
    extra: Mapping[str, Any] | None = None
    strategy: tuple[str, ...] | None = None
    explanation: str | None = None
    early: bool = False
    early_started_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    status: str | None = None
    duration_ms: float | None = None
    ledger: str | None = None
    tool_call_id: str | None = None
    dedup: Dedup | None = None
    timeout: Timeout | None = None


@dataclass(frozen=True)
class Attempt:
    """One stream of the round's decision; a provider retry re-streams it as the next attempt."""

    attempt: int
    actions: tuple[RoundAction, ...]
    generation_finished_at: datetime | None


@dataclass(frozen=True)
class Round:
    """A round (agent, turn_id, iteration) as its events tell it; ``outcome`` None = in progress."""

    agent: str
    turn_id: str
    iteration: int
    started_at: datetime
    finished_at: datetime | None
    generation_finished_at: datetime | None
    outcome: str | None
    policy_hash: str | None
    max_actions: int | None
    counts: Mapping[str, int]
    has: frozenset[str]
    tool_ids: frozenset[str]
    attempts: tuple[Attempt, ...]
    events: tuple[Event, ...] = field(repr=False)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.agent, self.turn_id, self.iteration)


def assemble(events: Iterable[Event]) -> Round:
    """Build the round from its events, whatever their order and however often each was sent.

    Every event must belong to the same round; raises ``ValueError`` otherwise or when there are
    none. Events repeating an ``event_id`` count once (if a repeat differs in content, which the
    store refuses anyway, the same one is kept whatever the order).
    """
    given = list(events)
    if not given:
        raise ValueError("a round needs at least one event")
    # Checked before de-duplication, which would hide a repeated id sent for another round.
    keys = {event.round_key for event in given}
    if len(keys) > 1:
        raise ValueError(f"events of different rounds cannot be assembled together: {sorted(keys)}")
    unique = _unique(given)
    ordered = tuple(sorted(unique, key=lambda event: (event.ts, event.event_id)))
    first = ordered[0]

    started = [event for event in ordered if event.type == ROUND_STARTED]
    finished = [event for event in ordered if event.type == ROUND_FINISHED]
    start = started[0] if started else None
    end = finished[-1] if finished else None

    actions: dict[tuple[int, int], RoundAction] = {}
    generation: dict[int, datetime] = {}
    kinds: dict[str, set[tuple[int, int]]] = {kind: set() for kind in KIND_EVENTS}
    tool_ids: set[str] = set()
    for event in ordered:
        tool_id = event.data.get("tool_id")
        if isinstance(tool_id, str):
            tool_ids.add(tool_id)
        if event.type == GENERATION_FINISHED:
            generation[event.attempt] = event.ts
            continue
        index = event.action_index
        if event.type not in ACTION_EVENT_TYPES or index is None:
            continue
        slot = (event.attempt, index)
        actions[slot] = _apply(actions.get(slot, RoundAction(index=index)), event)
        for kind, event_type in KIND_EVENTS.items():
            if event.type == event_type:
                kinds[kind].add(slot)

    attempts = tuple(
        Attempt(
            attempt=number,
            actions=tuple(
                _explained(action)
                for (attempt, _), action in sorted(actions.items())
                if attempt == number
            ),
            generation_finished_at=generation.get(number),
        )
        for number in sorted({attempt for attempt, _ in actions} | set(generation))
    )
    counts = {"actions": len(actions)}
    counts.update(
        {name: len(kinds[kind]) for name, kind in zip(COUNT_EVENTS, KIND_EVENTS, strict=True)}
    )
    return Round(
        agent=first.agent,
        turn_id=first.turn_id,
        iteration=first.iteration,
        started_at=start.ts if start is not None else first.ts,
        finished_at=end.ts if end is not None else None,
        # The last attempt's generation is the one the round's tools ran after.
        generation_finished_at=generation[max(generation)] if generation else None,
        outcome=end.data["outcome"] if end is not None else None,
        policy_hash=start.data.get("policy_hash") if start is not None else None,
        max_actions=start.data["max_actions"] if start is not None else None,
        counts=counts,
        has=frozenset(kind for kind, slots in kinds.items() if slots),
        tool_ids=frozenset(tool_ids),
        attempts=attempts,
        events=ordered,
    )


def _unique(events: Iterable[Event]) -> list[Event]:
    by_id: dict[str, Event] = {}
    for event in events:
        kept = by_id.get(event.event_id)
        if kept is None or _content_key(event) < _content_key(kept):
            by_id[event.event_id] = event
    return list(by_id.values())


def _content_key(event: Event) -> str:
    # A total order on content, so that which of two differing repeats survives never depends on
    # the order they came in.
    try:
        return json.dumps(event.data, sort_keys=True, default=repr)
    except TypeError:
        # Mapping keys of mixed types cannot be sorted (only possible from Python, not JSON).
        return repr(event.data)


def _apply(action: RoundAction, event: Event) -> RoundAction:
    """Fold one event into what is known about its action (events come in (ts, id) order)."""
    data = event.data
    tool_id = data.get("tool_id")
    # Every action-level event names the tool; the observed one is the authority, so others only
    # fill the gap while it has not arrived.
    if action.tool_id is None and isinstance(tool_id, str):
        action = replace(action, tool_id=tool_id)
    if event.type == ACTION_OBSERVED:
        return replace(action, action=data["action"], tool_id=tool_id)
    if event.type == ACTION_ACCEPTED:
        strategy = data.get("strategy")
        return replace(
            action,
            verdict="accepted",
            code=None,
            extra=None,
            strategy=tuple(strategy) if strategy is not None else None,
        )
    if event.type == ACTION_REJECTED:
        # The protocol carries no strategy for a rejection; a runtime that sends one anyway (an
        # extra field) gets a fuller explanation.
        sent = data.get("strategy")
        strategy = (
            tuple(sent)
            if isinstance(sent, list) and all(isinstance(item, str) for item in sent)
            else None
        )
        return replace(
            action,
            verdict="rejected",
            code=data["code"],
            extra=data.get("extra"),
            strategy=strategy,
        )
    if event.type == TOOL_EARLY_STARTED:
        return replace(
            action,
            early=True,
            early_started_at=event.ts,
            ledger="started",
            tool_call_id=data["tool_call_id"],
        )
    if event.type == LEDGER_DEDUP:
        return replace(
            action,
            early=True,
            ledger="dedup",
            tool_call_id=data["tool_call_id"],
            dedup=Dedup(data["original_action_index"], data["match"], data["fingerprint"]),
        )
    if event.type == TOOL_STARTED:
        return replace(action, started_at=event.ts, tool_call_id=data["tool_call_id"])
    if event.type == TOOL_FINISHED:
        return replace(
            action,
            finished_at=event.ts,
            status=data["status"],
            duration_ms=data["duration_ms"],
            tool_call_id=data["tool_call_id"],
        )
    if event.type == TOOL_TIMEOUT:
        timeout = Timeout(data["limit_ms"], data["elapsed_ms"], data.get("async_alternative"))
        if action.status is not None and action.status != "timeout":
            # A tool.finished already told how the call ended; the timeout adds the detail.
            return replace(action, timeout=timeout)
        return replace(
            action,
            timeout=timeout,
            finished_at=event.ts,
            status="timeout",
            duration_ms=data["elapsed_ms"],
            tool_call_id=data["tool_call_id"],
        )
    return action


def _explained(action: RoundAction) -> RoundAction:
    """Word a rejection once everything about the action is known (its action name may arrive
    after the rejection)."""
    if action.verdict != "rejected" or action.code is None:
        return action
    name = action.action
    if name is None:
        # Not observed (yet): a named tool means a call_tool; otherwise say "the action".
        name = "call_tool" if action.tool_id is not None else ""
    text = explain_rejection(
        action.code,
        action.extra,
        action=name,
        tool_id=action.tool_id,
        strategy=action.strategy or (),
    )
    return replace(action, explanation=text)


# --- the API shapes --------------------------------------------------------------------------


def _ts(value: datetime | None) -> str | None:
    return format_ts(value) if value is not None else None


def round_to_dict(
    round_: Round, url: str | None, *, agent_in_policy: bool = True
) -> dict[str, Any]:
    """The round object of the API (§4); ``agent_in_policy`` is for the caller, who knows the
    policy, to say."""
    return {
        "agent": round_.agent,
        "turn_id": round_.turn_id,
        "iteration": round_.iteration,
        "started_at": _ts(round_.started_at),
        "finished_at": _ts(round_.finished_at),
        "outcome": round_.outcome,
        "policy_hash": round_.policy_hash,
        "agent_in_policy": agent_in_policy,
        "counts": dict(round_.counts),
        "url": url,
    }


def round_detail_dict(
    round_: Round, url: str | None, *, agent_in_policy: bool = True
) -> dict[str, Any]:
    """The round object plus its attempts (each action's verdict, early start, ledger, timing),
    ``max_actions``, ``generation_finished_at`` and the stored events in timeline order."""
    out = round_to_dict(round_, url, agent_in_policy=agent_in_policy)
    out["max_actions"] = round_.max_actions
    out["generation_finished_at"] = _ts(round_.generation_finished_at)
    out["attempts"] = [
        {
            "attempt": attempt.attempt,
            "generation_finished_at": _ts(attempt.generation_finished_at),
            "actions": [action_to_dict(action) for action in attempt.actions],
        }
        for attempt in round_.attempts
    ]
    out["events"] = [dict(event.data) for event in round_.events]
    return out


def action_to_dict(action: RoundAction) -> dict[str, Any]:
    """One action of an attempt as JSON-ready data."""
    return {
        "index": action.index,
        "action": action.action,
        "tool_id": action.tool_id,
        "verdict": action.verdict,
        "code": action.code,
        "extra": dict(action.extra) if action.extra is not None else None,
        "strategy": list(action.strategy) if action.strategy is not None else None,
        "explanation": action.explanation,
        "early": action.early,
        "early_started_at": _ts(action.early_started_at),
        "started_at": _ts(action.started_at),
        "finished_at": _ts(action.finished_at),
        "status": action.status,
        "duration_ms": action.duration_ms,
        "ledger": action.ledger,
        "tool_call_id": action.tool_call_id,
        "dedup": (
            {
                "original_action_index": action.dedup.original_action_index,
                "match": action.dedup.match,
                "fingerprint": action.dedup.fingerprint,
            }
            if action.dedup is not None
            else None
        ),
        "timeout": (
            {
                "limit_ms": action.timeout.limit_ms,
                "elapsed_ms": action.timeout.elapsed_ms,
                "async_alternative": action.timeout.async_alternative,
            }
            if action.timeout is not None
            else None
        ),
    }
