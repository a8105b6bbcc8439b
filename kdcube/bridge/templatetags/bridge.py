"""``{% bridge_status %}``: the overview's line per KDCube bridge ("last envelope 3 s ago")."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils import timezone

from kdcube.bridge.services import bridge_statuses

register = template.Library()


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


@register.inclusion_tag("bridge/status.html")
def bridge_status() -> dict[str, Any]:
    return {"bridges": bridge_statuses(timezone.now())}
