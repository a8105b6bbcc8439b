"""Cards: a round as the live list, the stream and the history show it (plain values; the
``{% partialdef card %}`` of ``observe/round_card.html`` renders them)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.urls import NoReverseMatch

from observe.domain.events import ACTION_OBSERVED, Event
from observe.domain.rounds import Attempt, RoundAction, assembly_params
from observe.domain.rounds import Round as AssembledRound
from observe.models import Round
from observe.selectors import round_summary, round_url

PARAMS_PREVIEW: Final = 160


# --- cards --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chip:
    """One fact about an action: ``kind`` is its CSS class, ``detail`` the words beside it."""

    kind: str
    label: str
    detail: str = ""
    hint: str = ""


@dataclass(frozen=True)
class ActionRow:
    index: int
    name: str
    is_tool: bool
    params: str | None
    chips: tuple[Chip, ...]


@dataclass(frozen=True)
class AttemptRows:
    attempt: int
    actions: tuple[ActionRow, ...]


@dataclass(frozen=True)
class Card:
    """A round as the live list and the stream show it."""

    pk: int
    version: int
    agent: str
    turn_id: str
    iteration: int
    started_at: datetime
    outcome: str | None
    agent_in_policy: bool
    url: str | None
    attempts: tuple[AttemptRows, ...]
    #: Drift against the version the round names (issue 13): ``None`` not checked.
    drift: bool | None = None
    #: The first disagreement in words (the round page lists them all).
    drift_note: str | None = None

    @property
    def multi_attempt(self) -> bool:
        return len(self.attempts) > 1

    @property
    def outcome_text(self) -> str:
        return self.outcome or "in progress"


def seconds(ms: float, *, digits: int = 1) -> str:
    """Milliseconds as seconds for people: ``1234`` → ``1.2 s``, ``30000`` → ``30 s``."""
    text = f"{ms / 1000:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{ms / 1000:.0f}"
    return f"{text} s"


def safe_round_url(round_: Round | AssembledRound) -> str | None:
    """The round page, or ``None`` for a round whose agent cannot be part of a URL ("/")."""
    try:
        return round_url(round_)
    except NoReverseMatch:
        return None


def action_chips(action: RoundAction, attempt: Attempt) -> tuple[Chip, ...]:
    """The chips of one action: its verdict, then what happened to its call."""
    chips: list[Chip] = []
    if action.verdict == "accepted":
        chips.append(Chip("accepted", "accepted"))
    elif action.verdict == "rejected":
        chips.append(Chip("rejected", "rejected", action.explanation or action.code or ""))
    else:
        chips.append(Chip("pending", "no verdict yet"))
    if action.early_started_at is not None:
        chips.append(Chip("early", "started early", early_lead(action, attempt)))
    if action.dedup is not None:
        reused = action.tool_call_id or "the earlier call"
        chips.append(Chip("dedup", "dedup", f"reused {reused} (matched by {action.dedup.match})"))
    if action.timeout is not None:
        timeout = action.timeout
        chips.append(
            Chip(
                "timeout",
                "timeout",
                # Milliseconds matter here: a call stopped just past its limit.
                f"after {seconds(timeout.elapsed_ms, digits=3)}, limit {seconds(timeout.limit_ms)}",
                f"try {timeout.async_alternative}" if timeout.async_alternative else "",
            )
        )
    elif action.status == "error":
        chips.append(Chip("error", "error"))
    return tuple(chips)


def early_lead(action: RoundAction, attempt: Attempt) -> str:
    started = action.early_started_at
    finished = attempt.generation_finished_at
    if started is None or finished is None:
        return "while generation was still running"
    lead_ms = (finished - started) / timedelta(milliseconds=1)
    if lead_ms >= 0:
        return f"{seconds(lead_ms)} before generation finished"
    return f"{seconds(-lead_ms)} after generation finished"


def params_by_slot(events: Iterable[Event]) -> dict[tuple[int, int], Any]:
    found: dict[tuple[int, int], Any] = {}
    for event in events:
        index = event.action_index
        if event.type == ACTION_OBSERVED and index is not None and "params" in event.data:
            found.setdefault((event.attempt, index), event.data["params"])
    return found


def params_text(params: Any, *, limit: int | None = PARAMS_PREVIEW) -> str:
    text = json.dumps(params, ensure_ascii=False, default=str)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def card_for(row: Round) -> Card:
    """The card of a stored round, from its row alone (the assembly holds actions and params)."""
    assembled = round_summary(row)
    params = assembly_params(row.assembly)
    attempts = tuple(
        AttemptRows(
            attempt=attempt.attempt,
            actions=tuple(
                action_row(action, attempt, params.get((attempt.attempt, action.index)))
                for action in attempt.actions
            ),
        )
        for attempt in assembled.attempts
    )
    return Card(
        pk=row.pk,
        version=row.version,
        agent=row.agent,
        turn_id=row.turn_id,
        iteration=row.iteration,
        started_at=row.started_at,
        outcome=row.outcome,
        agent_in_policy=row.agent_in_policy,
        url=safe_round_url(row),
        attempts=attempts,
        drift=row.drift,
        drift_note=row.drift_notes[0]["what"] if row.drift and row.drift_notes else None,
    )


def action_row(action: RoundAction, attempt: Attempt, params: Any) -> ActionRow:
    name = action.tool_id or action.action or "(not observed yet)"
    return ActionRow(
        index=action.index,
        name=name,
        is_tool=action.tool_id is not None,
        params=params_text(params) if params is not None else None,
        chips=action_chips(action, attempt),
    )


def cards_for(rows: Sequence[Round]) -> list[Card]:
    """Cards for rows, in the rows' order (no query: each row holds its assembly)."""
    return [card_for(row) for row in rows]
