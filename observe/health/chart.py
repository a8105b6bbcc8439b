"""One tool's health chart: its p95 and timeout rate over the window, with its time limit as a
line. Server-rendered like the history chart: this module measures, the template draws the SVG
(no charting library, no JS)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from observe.domain.health import rate_text

WIDTH: Final = 720.0
HEIGHT: Final = 180.0
LEFT: Final = 56.0
RIGHT: Final = 48.0
TOP: Final = 10.0
BOTTOM: Final = 22.0


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    title: str


@dataclass(frozen=True)
class HealthChart:
    width: float
    height: float
    left: float
    right: float
    base: float
    top: float
    p95: str  # SVG polyline points
    rate: str
    dots: tuple[Dot, ...]
    #: a marker per timeout-rate point: a one-point polyline draws nothing
    rate_dots: tuple[Dot, ...]
    #: y of the time limit (ms) on the p95 axis, and its text; None when the tool has none
    limit_y: float | None
    limit_text: str
    peak_text: str
    ticks: tuple[tuple[float, str], ...]


def _ms_text(ms: float) -> str:
    return f"{ms / 1000:,.3g} s" if ms >= 1000 else f"{ms:,.0f} ms"


def health_chart(tool: dict[str, Any], since: str, until: str) -> HealthChart | None:
    """The chart of one tool entry of the report (``None`` without a trend)."""
    trend = [point for point in tool.get("trend") or [] if point["calls"]]
    if not trend:
        return None
    start, end = datetime.fromisoformat(since), datetime.fromisoformat(until)
    span = max((end - start).total_seconds(), 1.0)
    timeout_s = (tool.get("execution") or {}).get("timeout_s")
    limit_ms = float(timeout_s) * 1000 if isinstance(timeout_s, int | float) else None
    peaks = [point["p95_ms"] or 0.0 for point in trend]
    peak = max([*peaks, limit_ms or 0.0, 1.0]) * 1.1
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    base = HEIGHT - BOTTOM
    # A point sits in the middle of its step (an hour, or a day for long windows).
    step = 86400.0 if span > 2 * 86400 else 3600.0 if span > 65 * 60 else 300.0

    def x(bucket: str) -> float:
        moment = datetime.fromisoformat(bucket)
        offset = (moment - start).total_seconds() + step / 2
        return round(LEFT + min(max(offset / span, 0.0), 1.0) * plot_w, 1)

    def y_ms(ms: float) -> float:
        return round(base - ms / peak * plot_h, 1)

    def y_rate(rate: float) -> float:
        return round(base - rate * plot_h, 1)

    p95_points, rate_points, dots, rate_dots = [], [], [], []
    for point in trend:
        at = x(point["bucket"])
        if point["p95_ms"] is not None:
            p95_points.append(f"{at},{y_ms(point['p95_ms'])}")
        rate = point["timeout_rate"] or 0.0
        rate_points.append(f"{at},{y_rate(rate)}")
        rate_dots.append(
            Dot(
                at,
                y_rate(rate),
                f"{point['bucket']}: {point['timeouts']} of {point['calls']} calls timed out"
                f" ({rate_text(rate)})",
            )
        )
        bound = "≥ " if point.get("p95_at_limit") else ""
        dots.append(
            Dot(
                at,
                y_ms(point["p95_ms"] or 0.0),
                f"{point['bucket']}: {point['calls']} calls, p95 {bound}"
                f"{_ms_text(point['p95_ms'] or 0.0)}, {point['timeouts']} timed out"
                f" ({rate_text(rate)})",
            )
        )
    ticks = tuple(
        (round(LEFT + i / 4 * plot_w, 1), _time_text(start.timestamp() + i / 4 * span))
        for i in range(5)
    )
    return HealthChart(
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        right=WIDTH - RIGHT,
        base=base,
        top=TOP,
        p95=" ".join(p95_points),
        rate=" ".join(rate_points),
        dots=tuple(dots),
        rate_dots=tuple(rate_dots),
        limit_y=y_ms(limit_ms) if limit_ms is not None else None,
        limit_text=f"limit {_ms_text(limit_ms)}" if limit_ms is not None else "",
        peak_text=_ms_text(peak),
        ticks=ticks,
    )


def _time_text(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M")


def figure_text(value: float | None, kind: str | None) -> str:
    """A duration figure as the pages show it: ``≥ 2,000 ms (limit)`` when it lands on calls
    that timed out at their limit, ``≈ 1,929 ms`` for a bin estimate (± 1 %), exact otherwise."""
    if value is None:
        return "—"
    if kind == "limit":
        return f"≥ {value:,.0f} ms (limit)"
    if kind == "estimate":
        return f"≈ {value:,.0f} ms"
    return f"{value:,.2f}".rstrip("0").rstrip(".") + " ms"
