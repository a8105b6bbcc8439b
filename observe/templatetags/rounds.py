"""Template filters of round pages and cards: ``outcome_of`` (a round's outcome in words and
colour, from a stored row's counts or a live card's chips) and what a bridge inferred among a
round's events (``inferred_event``, ``inferred_notes``, ``inferred_count``; DESIGN §4)."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


class Outcome:
    """A round's outcome as a person reads it: its words and its colour (``tone``).

    ``ok`` only says the round ended; a round whose actions were rejected or timed out ended
    "ok" with trouble, so it is not shown green."""

    def __init__(self, outcome: str | None, rejected: int, timed_out: int) -> None:
        self.outcome = outcome or "running"
        notes = []
        if rejected:
            notes.append(f"{rejected} rejected")
        if timed_out:
            notes.append(f"{timed_out} timed out")
        base = {"running": "in progress", "in_progress": "in progress"}.get(
            self.outcome, self.outcome
        )
        self.text = f"{base} · {', '.join(notes)}" if notes else base
        if self.outcome == "failed":
            self.tone = "bad"
        elif self.outcome == "retried" or notes:
            self.tone = "warn"
        elif self.outcome == "ok":
            self.tone = "good"
        else:
            self.tone = "neutral"

    @property
    def css(self) -> str:
        """An extra class when the colour differs from the outcome's own (``ok`` with trouble)."""
        return " tone-warn" if self.outcome == "ok" and self.tone == "warn" else ""

    def __str__(self) -> str:
        return self.text


@register.filter
def outcome_of(value: Any) -> Outcome:
    """The outcome of a stored round (counts on the row) or of a live card (its chips)."""
    if hasattr(value, "rejections"):
        return Outcome(value.outcome, value.rejections or 0, getattr(value, "timeouts", 0) or 0)
    rejected = timed_out = 0
    for attempt in getattr(value, "attempts", ()):
        for row in attempt.actions:
            kinds = {chip.kind for chip in row.chips}
            rejected += "rejected" in kinds
            timed_out += "timeout" in kinds
    return Outcome(getattr(value, "outcome", None), rejected, timed_out)


def _event_data(row: Any) -> dict[str, Any] | None:
    """A round page's event row's event (its ``data`` is JSON text, or a mapping)."""
    data = getattr(row, "data", None)
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    return data if isinstance(data, dict) else None


@register.filter
def inferred_event(row: Any) -> bool:
    """Whether a round page's event row was inferred by a bridge (``"inferred": true``,
    DESIGN §4) rather than reported."""
    data = _event_data(row)
    return data is not None and data.get("inferred") is True


@register.filter
def inferred_notes(rows: Any) -> list[str]:
    """What a bridge says it inferred beyond the usual (its events' ``inferred_from``
    sentences: a re-stream, the index of a rejection, which action a rejection was), each once,
    in event order."""
    notes: dict[str, None] = {}
    for row in rows or ():
        data = _event_data(row)
        note = data.get("inferred_from") if data is not None else None
        if data is not None and data.get("inferred") is True and isinstance(note, str):
            notes.setdefault(note[:400])
    return list(notes)


@register.filter
def inferred_count(rows: Any) -> int:
    """How many of a round's event rows were inferred."""
    return sum(1 for row in rows or () if inferred_event(row))
