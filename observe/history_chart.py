"""The history page's chart: rounds per time bucket over the searched range, by kind.

Server-rendered: this module counts and measures, the template draws the SVG (no charting
library, no JS). The range is the search's ``since``..``until``, or the last hour.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from django.db import connection
from django.db.models import Count, Q
from django.db.models.expressions import RawSQL

from core.vocabulary import ROUND_KINDS
from observe.models import Round
from observe.round_counts import counted, counted_buckets, minute_of
from observe.selectors import RoundFilter

WIDTH: Final = 960.0
HEIGHT: Final = 150.0
LEFT: Final = 40.0
BOTTOM: Final = 22.0
TOP: Final = 8.0
#: Bucket sizes tried in order; the first giving at most MAX_BUCKETS buckets is used.
BUCKETS: Final = (
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=15),
    timedelta(hours=1),
    timedelta(hours=3),
    timedelta(hours=6),
    timedelta(days=1),
)
MAX_BUCKETS: Final = 120
#: (series class, counter column, label): rounds with at least one of each kind, in the order
#: of the kinds table.
KINDS: Final = tuple((kind.chip, kind.counter, kind.chart_label) for kind in ROUND_KINDS)


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    y: float
    height: float
    title: str


@dataclass(frozen=True)
class Series:
    kind: str
    label: str
    points: str  # SVG polyline points
    total: int


@dataclass(frozen=True)
class Chart:
    width: float
    height: float
    left: float
    base: float
    start: datetime
    end: datetime
    bucket_text: str
    bars: tuple[Bar, ...]
    series: tuple[Series, ...]
    ticks: tuple[tuple[float, datetime], ...]
    peak: int
    total: int
    truncated: bool
    #: Versions published inside the range: (x, number), drawn as marks.
    publishes: tuple[tuple[float, int], ...] = ()
    #: True when the range was fitted to the rounds (no ``since`` given).
    fitted: bool = False


def _bucket_text(size: timedelta) -> str:
    minutes = int(size.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 24 else f"{hours // 24} d"


#: Without ``since`` the chart fits the rounds of this span before its end (an hour that is
#: mostly empty says less than the ten minutes that hold rounds).
FIT_WITHIN: Final = timedelta(days=7)
#: The shortest fitted range (a few rounds still get several buckets).
FIT_AT_LEAST: Final = timedelta(minutes=5)


def _fitted_start(round_filter: RoundFilter, end: datetime) -> datetime | None:
    """The first matching round's start within :data:`FIT_WITHIN` before ``end``."""
    first = (
        round_filter.apply(
            Round.objects.filter(started_at__gte=end - FIT_WITHIN, started_at__lt=end)
        )
        .order_by("started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    if first is None:
        return None
    return min(first, end - FIT_AT_LEAST)


def _publishes(start: datetime, end: datetime) -> list[tuple[datetime, int]]:
    from policy.models import PolicyVersion

    return list(
        PolicyVersion.objects.filter(created_at__gte=start, created_at__lt=end)
        .order_by("number")
        .values_list("created_at", "number")
    )


def _bucket(start: datetime, size: timedelta, column: str = "started_at") -> RawSQL:
    """The bucket a time ``column`` falls in, counted from ``start`` (whole buckets)."""
    seconds = size.total_seconds()
    name = connection.ops.quote_name(column)
    if connection.vendor == "sqlite":
        # Milliseconds apart (julianday's double, rounded), then whole buckets.
        return RawSQL(
            f"CAST(round((julianday({name}) - julianday(%s)) * 86400000.0) AS INTEGER) / %s",
            [start.astimezone(UTC).replace(tzinfo=None).isoformat(" "), round(seconds * 1000)],
        )
    return RawSQL(f"floor(extract(epoch FROM {name} - %s) / %s)::int", [start, seconds])


def rounds_chart(round_filter: RoundFilter, *, now: datetime | None = None) -> Chart:
    now = now or datetime.now(UTC)
    end = min(round_filter.until or now, now)
    fitted = round_filter.since is None
    # A fitted range starts on a whole minute (the kept counts are per minute).
    start = round_filter.since or minute_of(
        _fitted_start(round_filter, end) or end - timedelta(hours=1)
    )
    if start >= end:
        start = end - timedelta(minutes=1)
    span = end - start
    size = next((b for b in BUCKETS if span / b <= MAX_BUCKETS), BUCKETS[-1])
    count = max(1, int(-(-span // size)))
    totals = [0] * count
    kinds = {kind: [0] * count for kind, _, _ in KINDS}
    rows_from = start
    if counted(round_filter) and start == minute_of(start):
        # Whole minutes from the counts ingest keeps (a week is at most 10 080 rows per
        # agent), the minute ``end`` falls in from its rounds.
        rows_from = max(start, minute_of(end))
        buckets = counted_buckets(
            round_filter.agent, start, rows_from, _bucket(start, size, "minute")
        )
        for bucket, sums in buckets:
            index = min(max(bucket, 0), count - 1)
            totals[index] += sums["rounds"]
            for kind, column, _ in KINDS:
                kinds[kind][index] += sums[f"with_{column}"]
    # Counted per bucket by the database (a month of rounds is millions of rows): one row
    # per bucket, not per round.
    rows = (
        round_filter.apply(Round.objects.filter(started_at__gte=rows_from, started_at__lt=end))
        .annotate(bucket=_bucket(start, size))
        .order_by()
        .values("bucket")
        .annotate(
            total=Count("pk"),
            **{kind: Count("pk", filter=Q(**{f"{column}__gt": 0})) for kind, column, _ in KINDS},
        )
    )
    row: dict[str, Any]
    for row in rows.iterator():  # type: ignore[assignment]  # the kinds' keys are annotated too
        index = min(max(int(row["bucket"]), 0), count - 1)
        totals[index] += row["total"]
        for kind, _, _ in KINDS:
            kinds[kind][index] += row[kind]
    peak = max(totals) or 1
    plot_w = WIDTH - LEFT - 8
    plot_h = HEIGHT - TOP - BOTTOM
    base = HEIGHT - BOTTOM
    step = plot_w / count

    def y(value: int) -> float:
        return round(base - value / peak * plot_h, 1)

    bars = []
    for i, total in enumerate(totals):
        at = start + i * size
        parts = ", ".join(f"{kinds[k][i]} {label}" for k, _, label in KINDS if kinds[k][i])
        title = f"{at:%Y-%m-%d %H:%M} UTC: {total} round{'s' if total != 1 else ''}"
        bars.append(
            Bar(
                x=round(LEFT + i * step + step * 0.1, 1),
                width=round(max(step * 0.8, 1.0), 1),
                y=y(total),
                height=round(base - y(total), 1),
                title=f"{title}{' (' + parts + ')' if parts else ''}",
            )
        )
    series = tuple(
        Series(
            kind=kind,
            label=label,
            points=" ".join(
                f"{round(LEFT + (i + 0.5) * step, 1)},{y(v)}" for i, v in enumerate(kinds[kind])
            ),
            total=sum(kinds[kind]),
        )
        for kind, _, label in KINDS
    )
    tick_every = max(1, count // 6)
    ticks = tuple(
        (round(LEFT + i * step, 1), start + i * size) for i in range(0, count, tick_every)
    )
    publishes = tuple(
        (round(LEFT + (at - start) / span * plot_w, 1), number)
        for at, number in _publishes(start, end)
    )
    return Chart(
        publishes=publishes,
        fitted=fitted,
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        base=base,
        start=start,
        end=end,
        bucket_text=_bucket_text(size),
        bars=tuple(bars),
        series=series,
        ticks=ticks,
        peak=max(totals),
        total=sum(totals),
        truncated=False,
    )
