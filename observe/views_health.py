"""Tool health pages: the Tools view (every tool of an agent, sortable, filterable) and one
tool's panel, which its editor page also loads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.timewindow import parse_moment
from observe.domain.health import DEDUPS, EARLY, FIGURES, TIMEOUTS, rate_text
from observe.health.chart import figure_text, health_chart
from observe.health.live import alerts_context
from observe.health.report import limit_impact, timeout_alerts, tool_health_report

TOOLS_TEMPLATE: Final = "observe/tools.html"
TOOL_TEMPLATE: Final = "observe/tool_health.html"
#: Sortable columns: (query name, label); the tool id sorts by name, the rest by number.
COLUMNS: Final = (
    ("tool_id", "Tool"),
    # Second: the column a reader acts on stays in sight at 800 px (it was off-screen last).
    ("advice", "Advice"),
    ("calls", "Calls"),
    ("p50_ms", "p50"),
    ("p95_ms", "p95"),
    ("p99_ms", "p99"),
    ("max_ms", "max"),
    (TIMEOUTS, "Timeouts"),
    ("timeout_rate", "Timeout rate"),
    ("errors", "Errors"),
    (EARLY, "Early"),
    (DEDUPS, "Dedups"),
    ("drifted_rounds", "Drifted rounds"),
)
SORTS: Final = frozenset(name for name, _ in COLUMNS)
WINDOWS: Final = ("1h", "24h", "7d")
DEFAULT_WINDOW: Final = "24h"


def _window(request: HttpRequest) -> str:
    value = request.GET.get("window", DEFAULT_WINDOW)
    return value if value in WINDOWS else DEFAULT_WINDOW


def _since(window: str) -> datetime | None:
    """The start of a window (one of ``WINDOWS``: a span, read as every time filter is)."""
    return parse_moment("window", window, now=datetime.now(UTC))


def _positive(value: str | None) -> float | None:
    try:
        number = float(value or "")
    except ValueError:
        return None
    return number if 0 < number <= 10**9 else None


def _first_dir(column: str) -> str:
    """Names sort A to Z first; numbers largest first (the slowest, the most timeouts)."""
    return "asc" if column == "tool_id" else "desc"


def _sort_key(name: str) -> Any:
    def key(tool: dict[str, Any]) -> Any:
        value = len(tool["advice"]) if name == "advice" else tool[name]
        # Tools with no value (no finished calls) sort after every number, either way round.
        return (value is None, value if value is not None else 0)

    return key


def with_advice_links(tool: dict[str, Any]) -> dict[str, Any]:
    """Each advice gets the link that opens the tool editor with its suggestion filled in; each
    duration figure its text (``≥ 2,000 ms (limit)``, ``≈ 1,929 ms``)."""
    tool["texts"] = {name: figure_text(tool[name], tool["figures"].get(name)) for name in FIGURES}
    rate = tool.get("timeout_rate")
    tool["texts"]["timeout_rate"] = rate_text(rate) if rate is not None else "—"
    url = tool.get("editor_url")
    for item in tool["advice"]:
        suggested = item["evidence"].get("suggested")
        if url and suggested:
            values = {name: ("0" if value is False else value) for name, value in suggested.items()}
            item["apply_url"] = f"{url}?{urlencode({**values, 'from': 'health'})}"
    return tool


@require_GET
def tools(request: HttpRequest) -> HttpResponse:
    if request.GET.get("partial") == "alerts":
        # The live page's timeout bar (the stream keeps it current afterwards).
        context = alerts_context(timeout_alerts(), oob=False)
        return render(request, "observe/tool_alerts.html#alerts", context)
    window = _window(request)
    agent = request.GET.get("agent") or None
    name = (request.GET.get("q") or "").strip()
    sort = request.GET.get("sort", "tool_id")
    sort = sort if sort in SORTS else "tool_id"
    descending = request.GET.get("dir", _first_dir(sort)) != "asc"
    report = tool_health_report(agent=agent, tool=name or None, since=_since(window))
    rows = [with_advice_links(tool) for tool in report["tools"]]
    present = [row for row in rows if _sort_key(sort)(row)[0] is False]
    missing = [row for row in rows if _sort_key(sort)(row)[0] is True]
    present.sort(key=_sort_key(sort), reverse=descending)
    base = {"window": window, "q": name, **({"agent": agent} if agent else {})}
    columns = [
        {
            "name": column,
            "label": label,
            "active": column == sort,
            "descending": descending,
            "url": "?"
            + urlencode(
                {
                    **base,
                    "sort": column,
                    "dir": (
                        ("asc" if descending else "desc") if column == sort else _first_dir(column)
                    ),
                }
            ),
        }
        for column, label in COLUMNS
    ]
    context = {
        "report": report,
        "rows": [*present, *missing],
        "columns": columns,
        "window": window,
        "windows": WINDOWS,
        "agent": agent or "",
        "agents": sorted({row["agent"] for row in rows}),
        "q": name,
        "sort": sort,
        "dir": "desc" if descending else "asc",
    }
    if request.GET.get("partial") == "table":
        return render(request, f"{TOOLS_TEMPLATE}#table", context)
    return render(request, TOOLS_TEMPLATE, context)


@require_GET
def tool(request: HttpRequest, agent: str, tool_id: str) -> HttpResponse:
    window = _window(request)
    report = tool_health_report(agent=agent, since=_since(window))
    found = next((t for t in report["tools"] if t["tool_id"] == tool_id), None)
    context = {
        "tool": with_advice_links(found) if found is not None else None,
        "agent": agent,
        "tool_id": tool_id,
        "window": window,
        "windows": WINDOWS,
        "report": report,
        "chart": (
            health_chart(found, report["window"]["since"], report["window"]["until"])
            if found is not None
            else None
        ),
    }
    limit = _positive(request.GET.get("timeout_s"))
    if limit is not None and found is not None and found["in_policy"]:
        context["proposed"] = limit_impact(
            agent=agent, tool_id=tool_id, limit_s=limit, since=_since(window)
        )
    if request.GET.get("partial") == "panel":
        return render(request, f"{TOOL_TEMPLATE}#panel", context)
    return render(request, TOOL_TEMPLATE, context)
