"""The round page: its events and its actions table."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core.timewindow import format_ts
from core.vocabulary import GENERATION_FINISHED, ROUND_FINISHED, ROUND_STARTED, TOOL_FINISHED
from engine.round.backstop import multi_action_enabled
from observe.domain.rounds import AssembledRound, RoundAction
from observe.live.cards import ActionRow, action_row, params_by_slot, params_text

# --- the round page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRow:
    type: str
    ts: str
    attempt: int
    action_index: int | None
    data: str


def event_rows(round_: AssembledRound) -> list[EventRow]:
    return [
        EventRow(
            type=event.type,
            ts=format_ts(event.ts),
            attempt=event.attempt,
            action_index=event.action_index,
            data=json.dumps(dict(event.data), indent=2, ensure_ascii=False, default=str),
        )
        for event in round_.events
    ]


@dataclass(frozen=True)
class ActionDetail:
    """One row of the round page's actions table."""

    attempt: int
    action: RoundAction
    row: ActionRow
    params: str | None
    #: What the runtime did next, or why nothing ran (empty: the row says it all).
    note: str = ""
    #: A failed call's error as its ``tool.finished`` reported it.
    error: str = ""


#: Fields of a ``tool.finished`` event that carry a failed call's error (a bridge maps the
#: runtime's ``error_code``; a runtime may send ``error`` or ``message``).
ERROR_FIELDS = ("error", "error_code", "error_message", "message")
#: Params longer than this are shown indented, one key a line.
PARAMS_INLINE = 60


def _errors_by_slot(round_: AssembledRound) -> dict[tuple[int, int], str]:
    found: dict[tuple[int, int], str] = {}
    for event in round_.events:
        if event.type != TOOL_FINISHED or event.action_index is None:
            continue
        data = event.data
        if data.get("status") != "error":
            continue
        parts = [f"{key}: {data[key]}" for key in ERROR_FIELDS if data.get(key)]
        found[(event.attempt, event.action_index)] = "; ".join(parts)
    return found


def _note(action: RoundAction, actions: tuple[RoundAction, ...], mode: str | None) -> str:
    """What the runtime did next after a rejection, or why an accepted action never ran."""
    if action.verdict == "rejected":
        later = [a.index for a in actions if a.index > action.index]
        if later:
            return (
                "Next: the runtime did not run it and stopped reading the stream here (actions "
                f"#{', #'.join(map(str, later))} were never checked or run); the actions it had "
                "accepted before went ahead, and the model is told why in its next round."
            )
        return (
            "Next: the runtime did not run it; the actions it had accepted before went ahead, "
            "and the model is told why in its next round."
        )
    ran = action.tool_call_id or action.status or action.timeout or action.dedup
    if action.verdict == "accepted" and not ran:
        if action.action in ("complete", "exit"):
            return "A final answer: there is no tool to run."
        if action.index > 0 and not multi_action_enabled(mode):
            return (
                "Accepted while streaming, but never run: with multi-action off "
                f"(mode {mode or 'not reported: off'}) the runtime runs only the first action."
            )
        return "Accepted, but no tool event was reported: it never ran, or has not yet."
    return ""


def _params_shown(given: Any) -> str:
    compact = params_text(given, limit=None)
    if len(compact) <= PARAMS_INLINE:
        return compact
    return json.dumps(given, indent=1, ensure_ascii=False, default=str)


def _reported_mode(round_: AssembledRound) -> str | None:
    """The ``multi_action_mode`` the round's ``round.started`` reported (None: not reported)."""
    for event in round_.events:
        if event.type == ROUND_STARTED:
            mode = event.data.get("multi_action_mode")
            return mode if isinstance(mode, str) else None
    return None


def reported_mode(round_: AssembledRound) -> str | None:
    """The round's ``multi_action_mode`` as ``round.started`` reported it (the round page)."""
    return _reported_mode(round_)


def reported_react_version(round_: AssembledRound) -> str | None:
    """The react agent ``round.started`` reported (``react_version``: ``v2``/``v3``), if any; a
    bridge's inferred ``round.started`` is :func:`inferred_react_version`'s."""
    for event in round_.events:
        if event.type == ROUND_STARTED and not event.data.get("inferred"):
            version = str(event.data.get("react_version") or "").strip().lower()
            return version if version in ("v2", "v3") else None
    return None


def reported_exec_code_complete(round_: AssembledRound) -> bool | None:
    """Whether the round's last stream streamed its code channel complete, as its
    ``generation.finished`` said (``exec_code_complete``; the KDCube bridge reads it from the
    exec streamer's deltas); None: not said (the same reading as
    :func:`observe.domain.rounds.exec_code_complete`)."""
    finished = [e for e in round_.events if e.type == GENERATION_FINISHED]
    if not finished:
        return None
    last = max(finished, key=lambda e: (e.attempt, e.data["ts"], e.event_id))
    value = last.data.get("exec_code_complete")
    return value if isinstance(value, bool) else None


def inferred_react_version(round_: AssembledRound) -> str | None:
    """The react agent a bridge inferred from the envelopes (``react_version`` on its inferred
    ``round.started``, or on ``round.finished`` of the round whose envelopes proved it)."""
    for event in round_.events:
        if event.type in (ROUND_STARTED, ROUND_FINISHED) and event.data.get("inferred"):
            version = str(event.data.get("react_version") or "").strip().lower()
            if version in ("v2", "v3"):
                return version
    return None


def action_details(round_: AssembledRound) -> list[ActionDetail]:
    """The actions table's rows, each with what the runtime did next when that needs saying."""
    mode = _reported_mode(round_)
    params = params_by_slot(round_.events)
    errors = _errors_by_slot(round_)
    details: list[ActionDetail] = []
    for attempt in round_.attempts:
        for action in attempt.actions:
            given = params.get((attempt.attempt, action.index))
            error = ""
            if action.status == "error":
                error = errors.get((attempt.attempt, action.index)) or (
                    "the runtime reported an error but no error text"
                )
            details.append(
                ActionDetail(
                    attempt=attempt.attempt,
                    action=action,
                    row=action_row(action, attempt, given),
                    params=_params_shown(given) if given is not None else None,
                    note=_note(action, attempt.actions, mode),
                    error=error,
                )
            )
    return details
