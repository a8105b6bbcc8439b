"""``{% bridge_status %}``: the overview's line per KDCube bridge ("last envelope 3 s ago")."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone

from kdcube.bridge.services import bridge_statuses

register = template.Library()


@register.inclusion_tag("bridge/status.html")
def bridge_status() -> dict[str, Any]:
    return {"bridges": bridge_statuses(timezone.now())}
