"""Cards: a round as the live list, the stream and the history show it (plain values; the
``{% partialdef card %}`` of ``observe/round_card.html`` renders them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.urls import NoReverseMatch

from core.vocabulary import ACTION_OBSERVED, ROUND_KINDS
from observe.domain.events import Event
from observe.domain.rounds import AssembledRound, Attempt, RoundAction, assembly_params
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
    """A round as the live list and the stream show it: the assembled round (its ids, times and
    outcome are the round's own, never copied) and what only its row knows."""

    pk: int
    version: int
    assembled: AssembledRound
    agent_in_policy: bool
    url: str | None
    attempts: tuple[AttemptRows, ...]
    #: Drift against the version the round names (issue 13): ``None`` not checked.
    drift: bool | None = None
    #: The first disagreement in words (the round page lists them all).
    drift_note: str | None = None

    @property
    def agent(self) -> str:
        return self.assembled.agent

    @property
    def turn_id(self) -> str:
        return self.assembled.turn_id

    @property
    def iteration(self) -> int:
        return self.assembled.iteration

    @property
    def started_at(self) -> datetime:
        return self.assembled.started_at

    @property
    def outcome(self) -> str | None:
        return self.assembled.outcome

    @property
    def error(self) -> str:
        """Why a failed round failed, as its ``round.finished`` said: "code: message" (either
        part alone when only one came); empty when it said nothing."""
        return error_text(self.assembled.error_code, self.assembled.error_message)

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


def _rejected(action: RoundAction, attempt: Attempt) -> tuple[str, str] | None:
    if action.verdict != "rejected":
        return None
    return action.explanation or action.code or "", ""


def _early(action: RoundAction, attempt: Attempt) -> tuple[str, str] | None:
    if action.early_started_at is None:
        return None
    return early_lead(action, attempt), ""


def _dedup(action: RoundAction, attempt: Attempt) -> tuple[str, str] | None:
    if action.dedup is None:
        return None
    reused = action.tool_call_id or "the earlier call"
    return f"reused {reused} (matched by {action.dedup.match})", ""


def _timeout(action: RoundAction, attempt: Attempt) -> tuple[str, str] | None:
    timeout = action.timeout
    if timeout is None:
        return None
    hints = [f"try {timeout.async_alternative}" if timeout.async_alternative else ""]
    if timeout.runtime_error_code:
        hints.append(f"inferred: the runtime reported {timeout.runtime_error_code}")
    return (
        # Milliseconds matter here: a call stopped just past its limit.
        f"after {seconds(timeout.elapsed_ms, digits=3)}, limit {seconds(timeout.limit_ms)}",
        "; ".join(hint for hint in hints if hint),
    )


#: Per round kind: whether an action is one, and then its chip's detail and hint. The chip's
#: class, words and place come from the kinds table; a kind added there without its entry here
#: fails at import rather than showing no chip.
KIND_DETAILS: Final[Mapping[str, Callable[[RoundAction, Attempt], tuple[str, str] | None]]] = {
    "rejection": _rejected,
    "early": _early,
    "dedup": _dedup,
    "timeout": _timeout,
}
assert set(KIND_DETAILS) == {kind.name for kind in ROUND_KINDS}, "a round kind without its chip"


def action_chips(action: RoundAction, attempt: Attempt) -> tuple[Chip, ...]:
    """The chips of one action: its verdict (the rejection kind's chip when it was rejected),
    then its round kinds in the table's order, then an error."""
    chips: list[Chip] = []
    if action.verdict == "accepted":
        chips.append(Chip("accepted", "accepted"))
    elif action.verdict != "rejected":
        chips.append(Chip("pending", "no verdict yet"))
    for kind in ROUND_KINDS:
        found = KIND_DETAILS[kind.name](action, attempt)
        if found is not None:
            chips.append(Chip(kind.chip, kind.action_chip, *found))
    if action.timeout is None and action.status == "error":
        chips.append(Chip("error", "error", error_text(action.error_code, action.error_message)))
    return tuple(chips)


def error_text(code: str | None, message: str | None) -> str:
    """A failed call's or round's reason in words: ``code: message``, either alone."""
    return ": ".join(part for part in (code, message) if part)


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
        assembled=assembled,
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
