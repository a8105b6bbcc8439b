"""Tool health over a window: the kept tallies summed per tool, set beside the tool's traits
and execution design from the draft, with the advice the numbers support (the API's shape)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.urls import NoReverseMatch, reverse

from core.timewindow import format_ts
from core.vocabulary import EXPLOITATION
from engine.document.jsonable import jsonable
from engine.tools.resolution import AgentResolution, EffectiveTool, UnknownAgentError, agent_names
from engine.traits.execution_design import parse_design
from engine.traits.traits import is_early, resolved_strategy
from observe.domain.health import (
    BUCKET_MINUTES,
    CALLS,
    FINISHED,
    LIMIT,
    TIMEOUTS,
    Thresholds,
    ToolDesign,
    ToolStats,
    advise,
    calls_over,
    merge_tally,
    quiet,
)
from observe.models import Round, RoundTool, ToolHealthBucket
from policy.domain.placement import entry_keys
from policy.selectors import agent_resolution, draft_state

#: The window when ``since`` is not given.
DEFAULT_SPAN: Final = timedelta(hours=24)
#: Up to this span the trend is per 5 minutes (the last hour: an hourly trend would be one point).
FIVE_MINUTE_UP_TO: Final = timedelta(minutes=65)
#: Up to this span the trend is per hour, beyond it per day.
HOURLY_UP_TO: Final = timedelta(days=2)


def thresholds() -> Thresholds:
    return Thresholds(
        min_calls=settings.TRAITDECK_HEALTH_MIN_CALLS,
        timeout_rate=settings.TRAITDECK_HEALTH_TIMEOUT_RATE,
        async_p95_s=settings.TRAITDECK_HEALTH_ASYNC_P95_S,
    )


@dataclass(frozen=True)
class Window:
    """``[since, until)``; ``since`` snapped down to a bucket start (what the tallies can tell)."""

    since: datetime
    until: datetime

    @classmethod
    def of(cls, since: datetime | None, until: datetime | None, now: datetime) -> Window:
        end = until or now
        start = since or end - DEFAULT_SPAN
        step = BUCKET_MINUTES * 60
        seconds = int(start.timestamp()) // step * step
        return cls(datetime.fromtimestamp(seconds, UTC), end)

    @property
    def late_from(self) -> datetime:
        """Where the window's last quarter starts (a bucket start: the tallies' grain)."""
        step = BUCKET_MINUTES * 60
        moment = self.until - (self.until - self.since) / 4
        return datetime.fromtimestamp(int(moment.timestamp()) // step * step, UTC)

    def trend_key(self, bucket: datetime) -> datetime:
        if self.until - self.since <= FIVE_MINUTE_UP_TO:
            return bucket  # a window this short is read from 5-minute rows only
        if self.until - self.since <= HOURLY_UP_TO:
            return bucket.replace(minute=0)
        return bucket.replace(hour=0, minute=0)


def _hour_up(moment: datetime) -> datetime:
    floor = moment.replace(minute=0, second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(hours=1)


def _cover(start: datetime, end: datetime) -> list[tuple[int, datetime, datetime]]:
    """``[start, end)`` as (span, from, to) ranges of rows: whole hours from the hourly rows,
    the edges from the 5-minute ones (a long window reads a twelfth of the rows)."""
    first, last = _hour_up(start), end.replace(minute=0, second=0, microsecond=0)
    if first >= last:
        return [(5, start, end)]
    parts = [(60, first, last)]
    if start < first:
        parts.append((5, start, first))
    if last < end:
        parts.append((5, last, end))
    return parts


def _rows(
    window: Window, agent: str | None, tool_id: str | None = None
) -> Iterator[tuple[str, str, datetime, dict[str, int]]]:
    """The rows covering the window, once each (the last quarter covered on its own, so no row
    straddles its start)."""
    cover = Q()
    late = window.late_from
    for start, end in ((window.since, late), (late, window.until)):
        if start < end:
            for span, low, high in _cover(start, end):
                cover |= Q(span=span, bucket__gte=low, bucket__lt=high)
    rows = ToolHealthBucket.objects.filter(cover)
    if agent:
        rows = rows.filter(agent=agent)
    if tool_id:
        rows = rows.filter(tool_id=tool_id)
    loads = orjson.loads
    for row_agent, row_tool, bucket, text in rows.values_list(
        "agent", "tool_id", "bucket", Cast("tally", output_field=TextField())
    ):
        yield row_agent, row_tool, bucket, loads(text)


def _add(into: dict[str, int], tally: dict[str, int]) -> None:
    merge_tally(into, tally)


def _drifted(window: Window, agent: str | None) -> dict[tuple[str, str], int]:
    """Drifted rounds that started in the window, per (agent, tool they used): read from the
    drift index (drifted rounds, newest first) to their tools. SQLite is told the index: its
    planner preferred a skip-scan of every round of the window by agent (280 ms at 100k
    rounds, against a few ms)."""
    quote = connection.ops.quote_name
    field = Round._meta.get_field("started_at")
    rounds, tools = quote(Round._meta.db_table), quote(RoundTool._meta.db_table)
    hint = " INDEXED BY round_drift_newest" if connection.vendor == "sqlite" else ""
    sql = (
        f"SELECT r.agent, t.tool_id, COUNT(*) FROM {rounds} AS r{hint}"
        f" JOIN {tools} AS t ON t.round_id = r.id"
        " WHERE r.drift = %s AND r.started_at >= %s AND r.started_at < %s"
    )
    params: list[Any] = [
        True,
        field.get_db_prep_value(window.since, connection),
        field.get_db_prep_value(window.until, connection),
    ]
    if agent:
        sql += " AND r.agent = %s"
        params.append(agent)
    with connection.cursor() as cursor:
        cursor.execute(sql + " GROUP BY r.agent, t.tool_id", params)
        return {(row_agent, tool_id): count for row_agent, tool_id, count in cursor.fetchall()}


def _design(tool: EffectiveTool) -> ToolDesign:
    design, _ = parse_design(tool.execution_design)
    return ToolDesign(
        timeout_s=design.timeout_s,
        mode=design.effective_mode,
        retry=design.retry,
        confirm=design.gated,
        async_alternative=design.async_alternative,
        exploitation=EXPLOITATION in resolved_strategy(tool.traits),
        early=is_early(tool.traits),
    )


def tool_editor_url(resolution: AgentResolution, tool: EffectiveTool) -> str | None:
    """The tool editor page of a configured tool (``None``: a built-in, or no URL can hold it)."""
    if tool.connection_index is None or tool.builtin:
        return None
    for conn in resolution.connections:
        if conn.index == tool.connection_index:
            key = entry_keys(conn, tool.callable)[0]
            try:
                return reverse("policy:tool-edit", args=[resolution.agent, conn.index, key])
            except NoReverseMatch:
                return None
    return None


def _resolutions(agents: Iterable[str]) -> dict[str, AgentResolution]:
    state = draft_state()
    found = {}
    for agent in agents:
        try:
            found[agent] = agent_resolution(state, agent)
        except UnknownAgentError:
            continue
    return found


def _matches(tool_id: str, tool: str | None) -> bool:
    return tool is None or tool.lower() in tool_id.lower()


def tool_health_report(
    *,
    agent: str | None = None,
    tool: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """``{"window", "tools": [...], "empty"}`` as ``GET /api/v1/tools/health`` answers
    (docs/tool-health.md). Every tool the agent's policy has is listed (with no calls, its
    numbers are null and ``empty`` says so); observed tools the policy lacks say ``in_policy``
    false."""
    window = Window.of(since, until, now or datetime.now(UTC))
    late_from = window.late_from
    points: dict[tuple[str, str], dict[datetime, dict[str, int]]] = {}
    lates: dict[tuple[str, str], dict[str, int]] = {}
    for row_agent, tool_id, bucket, tally in _rows(window, agent):
        if not _matches(tool_id, tool):
            continue
        key = (row_agent, tool_id)
        trend = points.get(key)
        if trend is None:
            trend = points[key] = {}
        moment = window.trend_key(bucket)
        point = trend.get(moment)
        if point is None:
            point = trend[moment] = {}
        _add(point, tally)
        if bucket >= late_from:
            _add(lates.setdefault(key, {}), tally)
    totals: dict[tuple[str, str], ToolStats] = {}
    for key, trend in points.items():
        stats = totals[key] = ToolStats()
        for point in trend.values():
            stats.add(point)
    names = (
        [agent] if agent else sorted({a for a, _ in totals} | set(agent_names(draft_state().data)))
    )
    resolutions = _resolutions(names)
    keys = set(totals)
    for name, resolution in resolutions.items():
        for known in resolution.tools:
            if _matches(known.tool_id, tool):
                keys.add((name, known.tool_id))
    drifted = _drifted(window, agent)
    limits = thresholds()
    tools = []
    for key in sorted(keys):
        owner = resolutions.get(key[0])
        effective = owner.find(key[1]) if owner is not None else None
        stats = totals.get(key, ToolStats())
        entry: dict[str, Any] = {"agent": key[0], "tool_id": key[1], **stats.summary()}
        entry["drifted_rounds"] = drifted.get(key, 0)
        entry["trend"] = [
            _trend_point(moment, point) for moment, point in sorted(points.get(key, {}).items())
        ]
        entry["in_policy"] = effective is not None
        if effective is not None and owner is not None:
            entry["traits"] = jsonable(effective.normalized_traits)
            entry["execution"] = jsonable(dict(effective.execution_design))
            entry["editor_url"] = tool_editor_url(owner, effective)
            late = ToolStats()
            late.add(lates.get(key, {}))
            entry["advice"] = advise(stats, late, _design(effective), limits)
        else:
            entry["traits"] = entry["execution"] = entry["editor_url"] = None
            entry["advice"] = []
        entry["quiet"] = quiet(stats, limits) if not entry["advice"] else None
        tools.append(entry)
    calls = sum(stats[CALLS] for stats in totals.values())
    return {
        "window": {"since": format_ts(window.since), "until": format_ts(window.until)},
        "tools": tools,
        "empty": calls == 0,
        "message": (
            None
            if calls
            else f"No tool calls were recorded between {format_ts(window.since)} and"
            f" {format_ts(window.until)}."
        ),
    }


def _trend_point(moment: datetime, point: dict[str, int]) -> dict[str, Any]:
    """One step of a tool's trend: its calls, p95 (timed-out calls at their limits) and
    timeouts."""
    stats = ToolStats()
    stats.add(point)
    p95 = stats.read(0.95)
    rate = stats.timeout_rate
    return {
        "bucket": format_ts(moment),
        "calls": stats[CALLS],
        "p95_ms": round(p95.ms, 3) if p95 is not None else None,
        "p95_at_limit": p95 is not None and p95.kind == LIMIT,
        "timeouts": stats[TIMEOUTS],
        "timeout_rate": round(rate, 4) if rate is not None else None,
    }


def limit_impact(
    *, agent: str, tool_id: str, limit_s: float, since: datetime | None, now: datetime | None = None
) -> dict[str, Any]:
    """What a time limit of ``limit_s`` would have done to the tool's recorded calls in the
    window: how many of its finished calls ran longer (they would have timed out)."""
    window = Window.of(since, None, now or datetime.now(UTC))
    stats = ToolStats()
    for _, _, _, tally in _rows(window, agent, tool_id):
        stats.add(tally)
    return {
        "timeout_s": limit_s,
        "finished": stats[FINISHED],
        "over": calls_over(stats.bins, limit_s * 1000),
        "timeouts": stats[TIMEOUTS],
    }


def timeout_alerts(*, now: datetime | None = None) -> list[dict[str, Any]]:
    """Tools whose timeout rate crossed the threshold in the last 10 minutes (the live bar),
    with at least a handful of calls so one unlucky call does not raise the alarm."""
    moment = now or datetime.now(UTC)
    window = Window(moment - timedelta(minutes=10), moment)
    totals: dict[tuple[str, str], Counter[str]] = {}
    rows = ToolHealthBucket.objects.filter(
        span=5, bucket__gte=window.since, bucket__lt=window.until
    )
    for row_agent, tool_id, tally in rows.values_list("agent", "tool_id", "tally"):
        if isinstance(tally, str):
            tally = orjson.loads(tally)
        totals.setdefault((row_agent, tool_id), Counter()).update(
            {CALLS: tally.get(CALLS, 0), TIMEOUTS: tally.get(TIMEOUTS, 0)}
        )
    limit = settings.TRAITDECK_HEALTH_TIMEOUT_RATE
    alerts = []
    for (row_agent, tool_id), counts in sorted(totals.items()):
        calls, timeouts = counts[CALLS], counts[TIMEOUTS]
        if calls >= ALERT_MIN_CALLS and timeouts / calls > limit:
            alerts.append(
                {
                    "agent": row_agent,
                    "tool_id": tool_id,
                    "calls": calls,
                    "timeouts": timeouts,
                    "timeout_rate": round(timeouts / calls, 4),
                }
            )
    return alerts


#: Calls in the last 10 minutes before the live bar names a tool.
ALERT_MIN_CALLS: Final = 5
