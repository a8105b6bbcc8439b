"""The round page: its events and its actions table."""

from __future__ import annotations

import json
from dataclasses import dataclass

from observe.domain.events import format_ts
from observe.domain.rounds import Round as AssembledRound
from observe.domain.rounds import RoundAction
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


def action_details(round_: AssembledRound) -> list[ActionDetail]:
    params = params_by_slot(round_.events)
    details: list[ActionDetail] = []
    for attempt in round_.attempts:
        for action in attempt.actions:
            given = params.get((attempt.attempt, action.index))
            details.append(
                ActionDetail(
                    attempt=attempt.attempt,
                    action=action,
                    row=action_row(action, attempt, given),
                    params=params_text(given, limit=None) if given is not None else None,
                )
            )
    return details
