"""Round counts kept by ingest per agent and minute (:class:`observe.models.RoundCountBucket`).

The history chart and the live view's totals read these instead of counting every round: a week
is at most 10 080 rows per agent whatever the rounds. Ingest folds in each round's facts before
and after a batch (a round whose start or kinds change moves between counters; a repeat changes
nothing), prune takes pruned rounds back out, a dropped day's partition takes its minutes along.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from django.db import connection, transaction
from django.db.models import Count, Expression, Q, Sum
from django.db.models.functions import TruncMinute

from core.vocabulary import ROUND_KINDS
from observe.domain.facts import RoundFacts
from observe.models import Round, RoundCountBucket
from observe.selectors import RoundFilter
from observe.store import hold_ingest_lock

#: The counted columns: rounds, each kind's actions, each kind's rounds with at least one.
COLUMNS: Final = (
    "rounds",
    *(kind.counter for kind in ROUND_KINDS),
    *(f"with_{kind.counter}" for kind in ROUND_KINDS),
)
MINUTE: Final = timedelta(minutes=1)

_Key = tuple[str, datetime]


def minute_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def _vector(counts: Iterable[int]) -> list[int]:
    counts = list(counts)
    return [1, *counts, *(1 if count > 0 else 0 for count in counts)]


def _add(change: dict[_Key, list[int]], key: _Key, sign: int, vector: list[int]) -> None:
    held = change.setdefault(key, [0] * len(COLUMNS))
    for position, value in enumerate(vector):
        held[position] += sign * value


def round_counts_record(changes: Iterable[tuple[RoundFacts | None, RoundFacts]]) -> None:
    """Fold a batch's rounds, each as (facts before, facts after), into the counts (inside the
    batch's transaction, under the ingest lock)."""
    change: dict[_Key, list[int]] = {}
    for old, new in changes:
        for sign, facts in ((-1, old), (1, new)):
            if facts is not None:
                key = (facts.agent, minute_of(datetime.fromisoformat(facts.started_at)))
                _add(change, key, sign, _vector(facts.counts))
    _apply(change)


def round_counts_forget(
    rounds: Iterable[tuple[Any, ...]], *, since: datetime | None = None
) -> None:
    """Take back the rounds about to be deleted, each ``(agent, started_at, *kind counters)``
    (the order of ``ROUND_KINDS``). ``since``: minutes before it are gone already."""
    change: dict[_Key, list[int]] = {}
    for agent, started, *counts in rounds:
        minute = minute_of(started)
        if since is None or minute >= since:
            _add(change, (agent, minute), -1, _vector(int(c or 0) for c in counts))
    _apply(change)


def round_counts_drop_before(moment: datetime) -> int:
    """Delete the minutes before ``moment`` (whole days of rounds dropped with their partition)."""
    deleted, _ = RoundCountBucket.objects.filter(minute__lt=moment).delete()
    return deleted


#: The columns :func:`round_counts_forget` takes from a round, in order.
FORGET_VALUES: Final = ("agent", "started_at", *(kind.counter for kind in ROUND_KINDS))


def _apply(change: dict[_Key, list[int]]) -> None:
    """One upsert adding each touched minute's difference, one DELETE of the minutes left with
    no round (when a minute lost one). No change, no query."""
    change = {key: vector for key, vector in change.items() if any(vector)}
    if not change:
        return
    quote = connection.ops.quote_name
    table = quote(RoundCountBucket._meta.db_table)
    field = RoundCountBucket._meta.get_field("minute")
    names = ("agent", "minute", *COLUMNS)
    sql = (
        f"INSERT INTO {table} ({', '.join(quote(n) for n in names)})"
        f" VALUES ({', '.join(['%s'] * len(names))})"
        f" ON CONFLICT ({quote('agent')}, {quote('minute')}) DO UPDATE SET "
        + ", ".join(f"{quote(c)} = {table}.{quote(c)} + excluded.{quote(c)}" for c in COLUMNS)
    )
    rows = [
        [agent, field.get_db_prep_save(minute, connection), *vector]
        for (agent, minute), vector in change.items()
    ]
    agents = sorted({agent for agent, _ in change})
    minutes = sorted({minute for _, minute in change})
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
        if all(vector[0] >= 0 for vector in change.values()):
            return  # no minute lost a round: none is left with none
        cursor.execute(
            f"DELETE FROM {table} WHERE {quote('rounds')} <= 0"
            f" AND {quote('agent')} IN ({', '.join(['%s'] * len(agents))})"
            f" AND {quote('minute')} IN ({', '.join(['%s'] * len(minutes))})",
            [*agents, *(field.get_db_prep_save(m, connection) for m in minutes)],
        )


def counted(round_filter: RoundFilter) -> bool:
    """Whether the kept counts answer a filter: all rounds, or one agent's (any other condition
    needs the rounds themselves). The time range is the caller's to check."""
    return replace(round_filter, agent=None, since=None, until=None) == RoundFilter()


def counted_buckets(
    agent: str | None, start: datetime, end: datetime, bucket: Expression
) -> list[tuple[int, dict[str, int]]]:
    """The kept counts of the minutes in [start, end) summed per ``bucket`` (an expression of
    the ``minute`` column: the chart's bucket number), over agents unless ``agent``. Summed by
    the database: a week is ~10k minutes per agent, a chart ~120 buckets."""
    rows = RoundCountBucket.objects.filter(minute__gte=start, minute__lt=end)
    if agent:
        rows = rows.filter(agent=agent)
    sums = (
        rows.annotate(bucket=bucket)
        .order_by()
        .values("bucket")
        .annotate(**{f"sum_{c}": Sum(c) for c in COLUMNS})
    )
    found = []
    row: dict[str, Any]
    for row in sums:  # type: ignore[assignment]  # the sums' keys are annotated too
        found.append((int(row["bucket"]), {c: int(row[f"sum_{c}"] or 0) for c in COLUMNS}))
    return found


def counted_totals(agent: str | None) -> dict[str, int]:
    """Every kept minute summed (of one agent, or all)."""
    rows = RoundCountBucket.objects.all()
    if agent:
        rows = rows.filter(agent=agent)
    sums = rows.aggregate(**{c: Sum(c) for c in COLUMNS})
    return {c: int(sums[c] or 0) for c in COLUMNS}


def recomputed() -> dict[_Key, tuple[int, ...]]:
    """The counts the stored rounds give (what the kept ones are compared with; migration 0012
    fills the table with the same sums)."""
    rows = (
        Round.objects.annotate(at=TruncMinute("started_at", tzinfo=UTC))
        .order_by()
        .values("agent", "at")
        .annotate(
            sum_rounds=Count("pk"),
            **{f"sum_{kind.counter}": Sum(kind.counter) for kind in ROUND_KINDS},
            **{
                f"sum_with_{kind.counter}": Count("pk", filter=Q(**{f"{kind.counter}__gt": 0}))
                for kind in ROUND_KINDS
            },
        )
    )
    found = {}
    row: dict[str, Any]
    for row in rows:  # type: ignore[assignment]  # the sums' keys are annotated too
        found[(row["agent"], row["at"].astimezone(UTC))] = tuple(
            int(row[f"sum_{c}"] or 0) for c in COLUMNS
        )
    return found


def stored() -> dict[_Key, tuple[int, ...]]:
    return {
        (row.agent, row.minute.astimezone(UTC)): tuple(getattr(row, c) for c in COLUMNS)
        for row in RoundCountBucket.objects.all()
    }


def round_counts_rebuild() -> int:
    """Replace the kept counts with the stored rounds' (for rounds written around ingest, as a
    bench's seed in SQL); returns how many minutes it wrote. The ingest lock is held, as ingest
    does, so no batch merges meanwhile."""
    with transaction.atomic():
        hold_ingest_lock()
        counts = recomputed()
        RoundCountBucket.objects.all().delete()
        RoundCountBucket.objects.bulk_create(
            [
                RoundCountBucket(
                    agent=agent, minute=minute, **dict(zip(COLUMNS, values, strict=True))
                )
                for (agent, minute), values in counts.items()
            ],
            batch_size=1000,
        )
    return len(counts)
