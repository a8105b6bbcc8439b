"""Pages of the live view: the live list, one round's timeline and the history (issue 5).

The live list and the websocket stream render cards from the same partial
(``observe/round_card.html#card``); ``?partial=rounds`` answers with just the list, which the
page fetches to resync after a gap in the stream.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Prefetch, prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from core.numbers import parse_whole
from core.vocabulary import OUTCOME_FILTERS, ROUND_KINDS
from engine.round.backstop import multi_action_enabled
from engine.round.react_version import VersionSources, react_version
from observe.domain.rounds import recorded_round
from observe.history_chart import rounds_chart
from observe.live import (
    KIND_LABELS,
    MAX_CARDS,
    action_details,
    counters_for,
    event_rows,
    filter_query,
    known_agents,
    parse_filter,
    safe_round_url,
)
from observe.live.round_page import (
    inferred_react_version,
    reported_exec_code_complete,
    reported_mode,
    reported_react_version,
)
from observe.live.stream import cards_html
from observe.models import Round, RoundTool
from observe.selectors import (
    DRIFT,
    BadCursor,
    distinct_values,
    latest_version,
    longest_rounds,
    round_assembled,
    round_get,
    rounds_page,
)
from observe.timeline import build_timeline
from policy.selectors import draft_state
from policy.versions import version_index, version_list

LIVE_TEMPLATE = "observe/live.html"
ROUND_TEMPLATE = "observe/round.html"
HISTORY_TEMPLATE = "observe/history.html"
HISTORY_PAGE_SIZE = 50
WS_PATH = "/ws/live/"


@dataclass(frozen=True)
class HistoryRow:
    row: Round
    url: str | None
    tools: list[str]

    @property
    def chips(self) -> list[KindChip]:
        """A chip per round kind the round has actions of, in the order of the kinds table."""
        return [
            KindChip(kind.chip, kind.counter, kind.chip_text(count))
            for kind in ROUND_KINDS
            if (count := getattr(self.row, kind.counter))
        ]


@dataclass(frozen=True)
class KindChip:
    css: str
    counter: str
    text: str


@require_GET
def live(request: HttpRequest) -> HttpResponse:
    round_filter = parse_filter(request.GET).round_filter
    # Read before the list: the stream starts here, so a change racing this render is sent
    # again (the card is replaced in place) rather than missed.
    since = latest_version()
    rows, _ = rounds_page(round_filter, limit=MAX_CARDS)
    # Each card is rendered once per version of its round (the stream renders the same ones).
    cards = cards_html(rows)
    if request.GET.get("partial") == "rounds":
        response = render(request, f"{LIVE_TEMPLATE}#rounds", {"card_html": cards})
        response["X-Live-Version"] = str(since)
        return response
    query = filter_query(round_filter)
    return render(
        request,
        LIVE_TEMPLATE,
        {
            "round_filter": round_filter,
            "agents": known_agents([round_filter.agent or ""]),
            "kinds": [*KIND_LABELS.items(), (DRIFT, "drift")],
            "counters": counters_for(round_filter),
            "card_html": cards,
            "since": since,
            "ws_url": f"{WS_PATH}?{urlencode([('since', str(since)), *query])}",
            "list_url": f"{reverse('observe:live')}?{urlencode([*query, ('partial', 'rounds')])}",
            "max_cards": MAX_CARDS,
            "demo": settings.DEMO,
        },
    )


def _zoom(request: HttpRequest) -> tuple[float, float] | None:
    """The timeline's zoom window from ``?from=&to=`` (seconds after the round's start)."""
    try:
        low = float(request.GET.get("from", ""))
        high = float(request.GET.get("to", ""))
    except ValueError:
        return None
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return None
    return low * 1000, high * 1000


@require_GET
def round_page(request: HttpRequest, agent: str, turn_id: str, iteration: int) -> HttpResponse:
    row = round_get(agent, turn_id, iteration)
    if row is None:
        raise Http404("No round with this agent, turn and iteration.")
    assembled = round_assembled(row)
    return render(
        request,
        ROUND_TEMPLATE,
        {
            "row": row,
            "round": assembled,
            "timeline": build_timeline(assembled, _zoom(request)),
            "actions": action_details(assembled),
            "mode": _mode_shown(assembled),
            "code_complete": reported_exec_code_complete(assembled),
            "react": react_version(
                VersionSources(
                    reported=reported_react_version(assembled),
                    inferred=inferred_react_version(assembled),
                    setting=settings.TRAITDECK_REACT_AGENT_VERSION,
                )
            ),
            "events": event_rows(assembled),
            "policy_version": version_index().credit(row.agent, row.policy_hash, row.started_at),
            "case_round": _case_round(row),
            # The timeline legend's item per kind (its mark: ``observe/kinds/<name>.svg``).
            "round_kinds": ROUND_KINDS,
        },
    )


def _mode_shown(assembled: Any) -> dict[str, str] | None:
    """The multi-action mode the round reported, as read by the runtime (None: not reported)."""
    mode = reported_mode(assembled)
    if mode is None:
        return None
    return {"reported": mode, "effective": "on" if multi_action_enabled(mode) else "off"}


def round_by_ids(request: HttpRequest) -> HttpResponse:
    """The round page, its ids in the query string (``round_url`` for ids no path can hold)."""
    iteration = parse_whole(request.GET.get("iteration", ""))
    if iteration is None:
        raise Http404("No round with this agent, turn and iteration.")
    agent, turn_id = request.GET.get("agent", ""), request.GET.get("turn_id", "")
    return round_page(request, agent=agent, turn_id=turn_id, iteration=iteration)


def _case_round(row: Round) -> str | None:
    """The round as a regression case would hold it (JSON), when the draft has its agent."""
    if row.agent not in draft_state().agents:
        return None
    found = recorded_round((row.agent, row.turn_id, row.iteration), row.assembly)
    return json.dumps(found, ensure_ascii=False) if found is not None else None


@require_GET
def history(request: HttpRequest) -> HttpResponse:
    parsed = parse_filter(request.GET, full=True)
    round_filter = parsed.round_filter
    errors = list(parsed.errors)
    before = request.GET.get("before", "").strip() or None
    status = 200
    by_duration = request.GET.get("sort") == "duration"
    try:
        if by_duration:
            # The longest finished rounds of the search (one page: no cursor by duration).
            rows, next_cursor = longest_rounds(round_filter, limit=HISTORY_PAGE_SIZE), None
        else:
            rows, next_cursor = rounds_page(round_filter, limit=HISTORY_PAGE_SIZE, before=before)
    except BadCursor as exc:
        errors.append(f"{exc}: showing the newest rounds instead.")
        status = 400
        before = None
        rows, next_cursor = rounds_page(round_filter, limit=HISTORY_PAGE_SIZE)
    query = filter_query(round_filter)
    # The tool rows of the page's days only: their round's partitions, pruned at plan time
    # (a round's tool rows carry its day), not a probe of every day's index.
    days = sorted({row.day for row in rows})
    prefetch_related_objects(rows, Prefetch("tools", RoundTool.objects.filter(day__in=days)))
    tool_ids = distinct_values(RoundTool, "tool_id", 300)
    return render(
        request,
        HISTORY_TEMPLATE,
        {
            "round_filter": round_filter,
            "agents": known_agents([round_filter.agent or ""]),
            "kinds": [*KIND_LABELS.items(), (DRIFT, "drift")],
            "rows": [
                HistoryRow(
                    row=row,
                    url=safe_round_url(row),
                    tools=sorted(tool.tool_id for tool in row.tools.all()),
                )
                for row in rows
            ],
            "errors": errors,
            "before": before,
            "older_url": (
                f"?{urlencode([*query, ('before', next_cursor)])}" if next_cursor else None
            ),
            "newest_url": f"?{urlencode(query)}" if before else None,
            "time_zone": timezone.get_current_timezone_name(),
            "by_duration": by_duration,
            "sort_duration_url": f"?{urlencode([*query, ('sort', 'duration')])}",
            "sort_newest_url": f"?{urlencode(query)}",
            "tool_ids": tool_ids,
            "tool_hint": (
                [t for t in tool_ids if round_filter.tool.lower() in t.lower()][:5]
                if round_filter.tool and not rows
                else []
            ),
            "chart": rounds_chart(round_filter),
            "versions": version_list(),
            "ranges": [
                ("15m", "last 15 min"),
                ("1h", "last hour"),
                ("24h", "last 24 h"),
                ("7d", "last 7 days"),
            ],
            "outcomes": OUTCOME_FILTERS,
        },
        status=status,
    )
