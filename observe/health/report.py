"""Tool health over a window: the kept tallies summed per tool, set beside the tool's traits
and execution design from the draft, with the advice the numbers support (the API's shape)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson
from django.conf import settings
from django.db.models import Count
from django.urls import NoReverseMatch, reverse

from observe.domain.events import format_ts
from observe.domain.health import (
    BIN,
    BUCKET_MINUTES,
    CALLS,
    FINISHED,
    TIMEOUTS,
    Thresholds,
    ToolDesign,
    ToolStats,
    advise,
    calls_over,
    percentile,
)
from observe.models import RoundTool, ToolHealthBucket
from policy.domain.execution_design import parse_design
from policy.domain.jsonable import jsonable
from policy.domain.placement import entry_keys
from policy.domain.resolution import AgentResolution, EffectiveTool, UnknownAgentError, agent_names
from policy.domain.traits import EXPLOITATION, is_early, resolved_strategy
from policy.selectors import agent_resolution, draft_state

#: The window when ``since`` is not given.
DEFAULT_SPAN: Final = timedelta(hours=24)
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
        if self.until - self.since <= HOURLY_UP_TO:
            return bucket.replace(minute=0)
        return bucket.replace(hour=0, minute=0)


@dataclass
class _Trend:
    calls: int = 0
    timeouts: int = 0
    bins: Counter[int] | None = None


def _rows(window: Window, agent: str | None) -> Iterable[tuple[str, str, datetime, Any]]:
    rows = ToolHealthBucket.objects.filter(bucket__gte=window.since, bucket__lt=window.until)
    if agent:
        rows = rows.filter(agent=agent)
    return rows.values_list("agent", "tool_id", "bucket", "tally").iterator(chunk_size=2000)


def _drifted(window: Window, agent: str | None) -> dict[tuple[str, str], int]:
    """Drifted rounds that started in the window, per (agent, tool they used)."""
    found = RoundTool.objects.filter(
        round__drift=True, round__started_at__gte=window.since, round__started_at__lt=window.until
    )
    if agent:
        found = found.filter(round__agent=agent)
    return {
        (row["round__agent"], row["tool_id"]): row["n"]
        for row in found.values("round__agent", "tool_id").annotate(n=Count("round_id"))
    }


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
    totals: dict[tuple[str, str], ToolStats] = {}
    lates: dict[tuple[str, str], ToolStats] = {}
    trends: dict[tuple[str, str], dict[datetime, _Trend]] = {}
    loads = orjson.loads
    for row_agent, tool_id, bucket, tally in _rows(window, agent):
        if not _matches(tool_id, tool):
            continue
        if isinstance(tally, str):  # read without the field's conversion on some backends
            tally = loads(tally)
        key = (row_agent, tool_id)
        stats = totals.get(key)
        if stats is None:
            stats = totals[key] = ToolStats()
            lates[key] = ToolStats()
            trends[key] = {}
        stats.add(tally)
        if bucket >= late_from:
            lates[key].add(tally)
        point = trends[key].setdefault(window.trend_key(bucket), _Trend(bins=Counter()))
        point.calls += tally.get(CALLS, 0)
        point.timeouts += tally.get(TIMEOUTS, 0)
        assert point.bins is not None
        for name, amount in tally.items():
            if name.startswith(BIN):
                point.bins[int(name[len(BIN) :])] += amount
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
            {
                "bucket": format_ts(moment),
                "calls": point.calls,
                "p95_ms": percentile(point.bins or {}, 0.95),
                "timeouts": point.timeouts,
            }
            for moment, point in sorted(trends.get(key, {}).items())
        ]
        entry["in_policy"] = effective is not None
        if effective is not None and owner is not None:
            entry["traits"] = jsonable(effective.normalized_traits)
            entry["execution"] = jsonable(dict(effective.execution_design))
            entry["editor_url"] = tool_editor_url(owner, effective)
            entry["advice"] = advise(stats, lates.get(key, ToolStats()), _design(effective), limits)
        else:
            entry["traits"] = entry["execution"] = entry["editor_url"] = None
            entry["advice"] = []
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


def limit_impact(
    *, agent: str, tool_id: str, limit_s: float, since: datetime | None, now: datetime | None = None
) -> dict[str, Any]:
    """What a time limit of ``limit_s`` would have done to the tool's recorded calls in the
    window: how many of its finished calls ran longer (they would have timed out)."""
    window = Window.of(since, None, now or datetime.now(UTC))
    stats = ToolStats()
    for _, row_tool, _, tally in _rows(window, agent):
        if row_tool == tool_id:
            stats.add(orjson.loads(tally) if isinstance(tally, str) else tally)
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
    rows = ToolHealthBucket.objects.filter(bucket__gte=window.since, bucket__lt=window.until)
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
