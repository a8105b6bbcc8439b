"""The stored tallies: kept by ingest, rebuilt from the stored events, compared in tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson
from django.db import connection, transaction

from observe.domain.events import stored_event
from observe.domain.health import (
    EXACT,
    FINISHED,
    MAX_US,
    Before,
    FlatKey,
    TallyKey,
    grouped,
    round_change,
    settled,
    slot_counts,
)
from observe.domain.rounds import Assembly, assembly_merge, assembly_new
from observe.models import Event, Round, ToolHealthBucket
from observe.store import event_whole, hold_ingest_lock

#: What ingest hands over per round it merged: the agent, the touched slots before the merge,
#: and the round's assembly after it.
RoundMerge = tuple[str, Before, Assembly]


@lru_cache(maxsize=4096)
def bucket_time(bucket: str) -> datetime:
    """The start of a bucket named ``YYYY-MM-DDTHH:MM`` or (an hour) ``YYYY-MM-DDTHH``, UTC."""
    return datetime.fromisoformat(
        f"{bucket}:00:00+00:00" if len(bucket) == 13 else f"{bucket}:00+00:00"
    )


def span_of(bucket: str) -> int:
    """Minutes a bucket name covers."""
    return 60 if len(bucket) == 13 else 5


def bucket_name(moment: datetime, span: int = 5) -> str:
    return moment.strftime("%Y-%m-%dT%H" if span == 60 else "%Y-%m-%dT%H:%M")


@dataclass
class TallyChange:
    """What a batch changes in the stored tallies, with the touched rows as they are stored."""

    change: dict[TallyKey, dict[str, int]]
    held: dict[TallyKey, tuple[int, dict[str, int]]]

    def write(self) -> None:
        """Write the changed rows (after the batch's rounds: a tally that loses its slowest
        call reads the max again from them)."""
        _write(self.change, self.held)


def tool_health_change(*, rounds: Sequence[RoundMerge]) -> TallyChange:
    """What a batch changes in the stored tallies (inside the batch's transaction), read before
    its rounds are written: ingest sends its writes without waiting for each other
    (:func:`observe.store.pipeline`), and a read among them would wait for all of them.

    Ingest holds the stream counter's row lock while it runs (batches write one after another on
    every database), so reading, adding and writing the touched rows cannot race another batch.
    """
    flat: dict[FlatKey, int] = {}
    for agent, before, state in rounds:
        round_change(agent, before, state, flat)
    change = grouped(flat)
    return TallyChange(change, _held(change))


def tool_health_forget(
    *, rounds: Iterable[tuple[str, Assembly]], since: datetime | None = None
) -> None:
    """Take back what the (agent, assembly) ``rounds`` contributed to the stored tallies, for
    rounds about to be deleted: the tallies then stay what the remaining events give (what
    ``toolhealth_backfill`` would rebuild), and rows left with nothing are deleted. The caller
    holds the ingest lock (:func:`observe.store.hold_ingest_lock`) in its transaction.
    ``since``: buckets before it are gone already (:func:`tool_health_drop_before`)."""
    flat: dict[FlatKey, int] = {}
    for agent, state in rounds:
        for slot in state.get("slots", {}).values():
            slot_counts(agent, slot, flat, -1)
    change = grouped(flat)
    if since is not None:
        change = {key: delta for key, delta in change.items() if bucket_time(key[2]) >= since}
    _apply(change)


def tool_health_drop_before(moment: datetime) -> int:
    """Delete the tallies of buckets that start before ``moment``: what dropping whole days of
    rounds does to them (the day's calls leave with the day, cut at the same boundary)."""
    deleted, _ = ToolHealthBucket.objects.filter(bucket__lt=moment).delete()
    return deleted


def _json(value: Any) -> Any:
    field = ToolHealthBucket._meta.get_field("tally")
    if connection.vendor == "sqlite":
        return orjson.dumps(value).decode("utf-8")
    return field.get_db_prep_save(value, connection)


def _time(value: datetime) -> Any:
    field = ToolHealthBucket._meta.get_field("bucket")
    return field.get_db_prep_save(value, connection)


def _db_time(value: Any) -> datetime:
    """A ``bucket`` read with plain SQL, as the ORM returns it (aware, UTC): SQLite gives
    text."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def _apply(change: dict[TallyKey, dict[str, int]]) -> None:
    """One read of the touched rows, then :func:`_write`. No change, no query."""
    _write(change, _held(change))


def _held(change: dict[TallyKey, dict[str, int]]) -> dict[TallyKey, tuple[int, dict[str, int]]]:
    """The stored rows ``change`` touches, by key: primary key and tally (one read; no change,
    no query)."""
    if not change:
        return {}
    agents = {agent for agent, _, _ in change}
    spans = {span_of(bucket) for _, _, bucket in change}
    buckets = {bucket_time(bucket) for _, _, bucket in change}
    held: dict[TallyKey, tuple[int, dict[str, int]]] = {}
    quote = connection.ops.quote_name
    table = quote(ToolHealthBucket._meta.db_table)
    tally_field = ToolHealthBucket._meta.get_field("tally")
    # Plain SQL: building the equivalent queryset cost more than the query, a fifth of a
    # 100-event batch. The spans lead the (span, bucket) index: without them the buckets were
    # looked for in the whole index, a read that grew with the month of tallies (0.6 → 1.4 ms
    # a batch at 1M events, 798 pages read for 98 rows).
    columns = ", ".join(
        quote(name) for name in ("id", "agent", "tool_id", "span", "bucket", "tally")
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {table}"
            f" WHERE {quote('agent')} IN ({', '.join(['%s'] * len(agents))})"
            f" AND {quote('span')} IN ({', '.join(['%s'] * len(spans))})"
            f" AND {quote('bucket')} IN ({', '.join(['%s'] * len(buckets))})",
            [*agents, *sorted(spans), *(_time(bucket) for bucket in buckets)],
        )
        for pk, agent, tool_id, span, bucket, tally in cursor.fetchall():
            value = (
                orjson.loads(tally)
                if isinstance(tally, str)
                else tally_field.from_db_value(tally, None, connection)  # type: ignore[arg-type]
            )
            held[(agent, tool_id, bucket_name(_db_time(bucket), span))] = (pk, value)
    return held


def _write(
    change: dict[TallyKey, dict[str, int]], held: dict[TallyKey, tuple[int, dict[str, int]]]
) -> None:
    """One UPDATE, one INSERT and one DELETE statement. A row left counting nothing is
    deleted — a call moved to another bucket by a later event, or a pruned round's — so no
    stored row is ever empty. No change, no query."""
    if not change:
        return
    quote = connection.ops.quote_name
    table = quote(ToolHealthBucket._meta.db_table)
    updates, inserts, emptied = [], [], []
    for key, delta in change.items():
        found = held.get(key)
        if found is None:
            inserts.append(
                (key[0], key[1], span_of(key[2]), _time(bucket_time(key[2])), _json(settled(delta)))
            )
            continue
        tally = dict(found[1])
        added: list[int] = []
        removed: list[int] = []
        for name, amount in delta.items():
            if name.startswith(EXACT):
                (added if amount > 0 else removed).append(int(name[len(EXACT) :]))
                continue
            total = tally.get(name, 0) + amount
            if total:
                tally[name] = total
            else:
                tally.pop(name, None)
        _keep_max(key, tally, added, removed)
        if tally:
            updates.append((_json(tally), found[0]))
        else:
            emptied.append(found[0])
    with connection.cursor() as cursor:
        # One statement each (a row per statement was a statement to parse and plan per row
        # on PostgreSQL); ``VALUES`` names its columns column1, column2 on both databases.
        for first in range(0, len(updates), _ROWS_PER_STATEMENT):
            chunk = updates[first : first + _ROWS_PER_STATEMENT]
            cursor.execute(
                f"UPDATE {table} SET {quote('tally')} = v.column2"
                f" FROM (VALUES {', '.join(['(%s, %s)'] * len(chunk))}) AS v"
                f" WHERE {table}.{quote('id')} = v.column1",
                [value for tally, pk in chunk for value in (pk, tally)],
            )
        names = ("agent", "tool_id", "span", "bucket", "tally")
        columns = ", ".join(quote(name) for name in names)
        for first in range(0, len(inserts), _ROWS_PER_STATEMENT):
            new = inserts[first : first + _ROWS_PER_STATEMENT]
            marks = ", ".join([f"({', '.join(['%s'] * len(names))})"] * len(new))
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {marks}",
                [value for row in new for value in row],
            )
        if emptied:
            cursor.execute(
                f"DELETE FROM {table} WHERE {quote('id')} IN ({', '.join(['%s'] * len(emptied))})",
                emptied,
            )


#: Rows per UPDATE or INSERT statement of :func:`_apply` (well under every database's limit on
#: statement parameters).
_ROWS_PER_STATEMENT = 500

#: How long before a bucket a round that has a call in it may have started (a call's duration
#: is refused beyond a day).
_ROUND_REACH = timedelta(days=1, minutes=5)


def _keep_max(key: TallyKey, tally: dict[str, int], added: list[int], removed: list[int]) -> None:
    """Fold a delta's changed durations into the tally's exact max. Adding takes the larger;
    taking back the slowest call (a replaced ``tool.finished``, a call reported later as a
    timeout, a pruned round) reads the max again from the rounds with calls in the bucket,
    which are already written (ingest) or already deleted (prune)."""
    if not tally.get(FINISHED):
        tally.pop(MAX_US, None)
        return
    held = tally.get(MAX_US)
    if held is not None and not any(value >= held for value in removed):
        if added:
            tally[MAX_US] = max(held, *added)
        return
    if held is None and not removed and added:
        tally[MAX_US] = max(added)
        return
    found = _max_from_rounds(key)
    if found is None:
        tally.pop(MAX_US, None)
    else:
        tally[MAX_US] = found


def _max_from_rounds(key: TallyKey) -> int | None:
    """The slowest finished call of one tally, recomputed from the stored rounds' assemblies
    (the agent's rounds that used the tool and started up to a day before the bucket)."""
    agent, tool_id, bucket = key
    start = bucket_time(bucket)
    end = start + timedelta(minutes=span_of(bucket))
    rounds = Round.objects.filter(
        agent=agent,
        tools__tool_id=tool_id,
        started_at__gte=start - _ROUND_REACH,
        started_at__lt=end,
    ).values_list("assembly", flat=True)
    flat: dict[FlatKey, int] = {}
    for state in rounds:
        for slot in (state or {}).get("slots", {}).values():
            slot_counts(agent, slot, flat, 1)
    prefix = (agent, tool_id, bucket)
    values = [
        int(name[len(EXACT) :])
        for (a, t, b, name), amount in flat.items()
        if (a, t, b) == prefix and name.startswith(EXACT) and amount > 0
    ]
    return max(values) if values else None


def stored_tallies() -> dict[TallyKey, dict[str, int]]:
    """The kept tallies, without empty ones (what a recompute is compared with)."""
    return {
        (row.agent, row.tool_id, bucket_name(row.bucket, row.span)): dict(row.tally)
        for row in ToolHealthBucket.objects.all()
        if row.tally
    }


#: Rounds read per query by the recompute.
_CHUNK = 500


def _round_events(chunk: Sequence[int]) -> Iterator[tuple[int, list[Any]]]:
    keys = {
        pk: (agent, turn_id, iteration)
        for pk, agent, turn_id, iteration in Round.objects.filter(pk__in=chunk).values_list(
            "pk", "agent", "turn_id", "iteration"
        )
    }
    rows = Event.objects.filter(round_id__in=chunk).values_list(
        "round_id", "event_id", "type", "ts", "data"
    )
    by_round: dict[int, list[Any]] = {}
    for round_id, event_id, event_type, ts, data in rows:
        whole = event_whole(data, event_id, event_type, ts, keys[round_id])
        by_round.setdefault(round_id, []).append(whole)
    yield from by_round.items()


def recomputed_tallies() -> dict[TallyKey, dict[str, int]]:
    """The tallies the stored events give, each round assembled afresh from its events."""
    flat: dict[FlatKey, int] = {}
    agents = dict(Round.objects.values_list("pk", "agent"))
    ids = sorted(agents)
    for first in range(0, len(ids), _CHUNK):
        for round_id, datas in _round_events(ids[first : first + _CHUNK]):
            state = assembly_merge(assembly_new(), [stored_event(data) for data in datas])
            for slot in state["slots"].values():
                slot_counts(agents[round_id], slot, flat, 1)
    return {key: settled(tally) for key, tally in grouped(flat).items()}


def tool_health_backfill() -> int:
    """Replace the kept tallies with a recompute from the stored events; returns how many
    buckets it wrote. Rerunning it gives the same rows. The stream counter's row is locked
    first, as ingest does, so no batch merges while the tallies are rebuilt."""
    with transaction.atomic():
        hold_ingest_lock()
        tallies = recomputed_tallies()
        ToolHealthBucket.objects.all().delete()
        ToolHealthBucket.objects.bulk_create(
            [
                ToolHealthBucket(
                    agent=agent,
                    tool_id=tool_id,
                    span=span_of(bucket),
                    bucket=bucket_time(bucket),
                    tally=tally,
                )
                for (agent, tool_id, bucket), tally in tallies.items()
            ],
            batch_size=1000,
        )
    return len(tallies)
