"""The live page's timeout bar, as an out-of-band fragment every stream message carries."""

from __future__ import annotations

import time
from typing import Any, Final

from channels.db import database_sync_to_async
from django.conf import settings
from django.template.loader import render_to_string

from observe.domain.health import rate_text
from observe.health.report import timeout_alerts

#: Seconds one render serves every viewer of this process (a batch a second would otherwise
#: query once per viewer).
FRESH_S: Final = 2.0
_last: tuple[float, str] | None = None


def alerts_context(alerts: list[dict[str, Any]], *, oob: bool) -> dict[str, Any]:
    return {
        "alerts": [{**alert, "rate_text": rate_text(alert["timeout_rate"])} for alert in alerts],
        "oob": oob,
        "limit_pct": rate_text(settings.TRAITDECK_HEALTH_TIMEOUT_RATE),
    }


def _render() -> str:
    return render_to_string(
        "observe/tool_alerts.html#alerts", alerts_context(timeout_alerts(), oob=True)
    )


async def alerts_fragment() -> str:
    """``#tool-alerts`` out of band, rendered at most every :data:`FRESH_S` seconds."""
    global _last
    now = time.monotonic()
    held = _last
    if held is not None and now - held[0] < FRESH_S:
        return held[1]
    html: str = await database_sync_to_async(_render)()
    _last = (now, html)
    return html
