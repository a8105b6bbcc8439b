"""``GET /api/v1/tools/health``: per tool, what its calls did over a window, beside its policy."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import P, QueryEx, Router, Status

from observe.api import READ_AUTH, ErrorOut, parse_time
from observe.health.report import tool_health_report

router = Router(tags=["tool health"])

_SPAN = "ISO 8601, or 15m / 1h / 24h / 7d before now"


@router.get("/tools/health", auth=READ_AUTH, response={200: dict[str, Any], 422: ErrorOut})
def tools_health(
    request: HttpRequest,
    agent: str | None = None,
    tool: QueryEx[str | None, P(description="case-insensitive substring of a tool id")] = None,
    since: QueryEx[str | None, P(description=f"{_SPAN}; default 24h")] = None,
    until: QueryEx[str | None, P(description=f"{_SPAN}; default now")] = None,
) -> Any:
    """Per tool: calls, nearest-rank p50/p95/p99/max duration, timeouts and their rate, errors,
    rejections by code, early starts, dedups, drifted rounds, the trend, the tool's traits and
    execution design, and the advice the numbers support (docs/tool-health.md)."""
    report = tool_health_report(
        agent=agent or None,
        tool=tool or None,
        since=parse_time("since", since),
        until=parse_time("until", until),
    )
    return Status(200, report)
