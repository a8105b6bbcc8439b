"""``{% bridge_status %}``: the overview's line per KDCube bridge ("last envelope 3 s ago")."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils import timezone

from bridge.services import bridge_statuses

register = template.Library()


@register.filter
def inferred_event(row: Any) -> bool:
    """Whether a round page's event row (its ``data`` is the event as JSON text, or a mapping)
    was inferred by a bridge (``"inferred": true``, DESIGN §4) rather than reported."""
    data = getattr(row, "data", None)
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return False
    return isinstance(data, dict) and data.get("inferred") is True


@register.filter
def inferred_count(rows: Any) -> int:
    """How many of a round's event rows were inferred."""
    return sum(1 for row in rows or () if inferred_event(row))


@register.inclusion_tag("bridge/status.html")
def bridge_status() -> dict[str, Any]:
    return {"bridges": bridge_statuses(timezone.now())}
