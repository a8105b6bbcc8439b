"""The stored tallies: kept by ingest, rebuilt from the stored events, compared in tests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connection, transaction
from django.db.models import F

from observe.domain.events import stored_event
from observe.domain.health import (
    Before,
    Tally,
    TallyKey,
    add_into,
    nonzero,
    round_change,
    round_tallies,
)
from observe.domain.rounds import assembly_merge, assembly_new
from observe.models import Event, Round, StreamCounter, ToolHealthBucket

#: What ingest hands over per round it merged: the agent, the touched slots before the merge,
#: and the round's assembly after it.
RoundMerge = tuple[str, Before, dict[str, Any]]


@lru_cache(maxsize=4096)
def bucket_time(bucket: str) -> datetime:
    """The start of a bucket named ``YYYY-MM-DDTHH:MM`` (UTC)."""
    return datetime.fromisoformat(f"{bucket}:00+00:00")


def bucket_name(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M")


def tool_health_record(*, rounds: Sequence[RoundMerge]) -> None:
    """Fold what a batch changed into the stored tallies (inside the batch's transaction).

    Ingest holds the stream counter's row lock while it runs (batches write one after another on
    every database), so reading, adding and writing the touched rows cannot race another batch.
    """
    change: dict[TallyKey, Tally] = {}
    for agent, before, state in rounds:
        add_into(change, round_change(agent, before, state))
    changed = {key: tally for key, tally in change.items() if any(tally.values())}
    if changed:
        _apply(changed)


def _apply(change: dict[TallyKey, Tally]) -> None:
    agents = {agent for agent, _, _ in change}
    buckets = {bucket_time(bucket) for _, _, bucket in change}
    held = {
        (row.agent, row.tool_id, bucket_name(row.bucket)): row
        for row in ToolHealthBucket.objects.filter(agent__in=agents, bucket__in=buckets)
    }
    updated, created = [], []
    for key, delta in change.items():
        row = held.get(key)
        if row is None:
            created.append(
                ToolHealthBucket(
                    agent=key[0], tool_id=key[1], bucket=bucket_time(key[2]), tally=nonzero(delta)
                )
            )
            continue
        tally = dict(row.tally)
        for name, amount in delta.items():
            tally[name] = tally.get(name, 0) + amount
        row.tally = nonzero(tally)
        updated.append(row)
    if updated:
        ToolHealthBucket.objects.bulk_update(updated, ["tally"])
    if created:
        ToolHealthBucket.objects.bulk_create(created)


def stored_tallies() -> dict[TallyKey, dict[str, int]]:
    """The kept tallies, without empty ones (what a recompute is compared with)."""
    return {
        (row.agent, row.tool_id, bucket_name(row.bucket)): dict(row.tally)
        for row in ToolHealthBucket.objects.all()
        if row.tally
    }


#: Rounds read per query by the recompute.
_CHUNK = 500


def _round_events(chunk: Sequence[int]) -> Iterator[tuple[int, list[Any]]]:
    rows = Event.objects.filter(round_id__in=chunk).values_list("round_id", "data")
    by_round: dict[int, list[Any]] = {}
    for round_id, data in rows:
        by_round.setdefault(round_id, []).append(data)
    yield from by_round.items()


def recomputed_tallies() -> dict[TallyKey, dict[str, int]]:
    """The tallies the stored events give, each round assembled afresh from its events."""
    total: dict[TallyKey, Tally] = {}
    agents = dict(Round.objects.values_list("pk", "agent"))
    ids = sorted(agents)
    for first in range(0, len(ids), _CHUNK):
        for round_id, datas in _round_events(ids[first : first + _CHUNK]):
            state = assembly_merge(assembly_new(), [stored_event(data) for data in datas])
            add_into(total, round_tallies(agents[round_id], state))
    return {key: nonzero(tally) for key, tally in total.items() if nonzero(tally)}


def tool_health_backfill() -> int:
    """Replace the kept tallies with a recompute from the stored events; returns how many
    buckets it wrote. Rerunning it gives the same rows. The stream counter's row is locked
    first, as ingest does, so no batch merges while the tallies are rebuilt."""
    with transaction.atomic():
        if connection.vendor != "sqlite":
            list(StreamCounter.objects.select_for_update().filter(pk=StreamCounter.SINGLETON_ID))
        else:
            # SQLite: take the write lock now (a write), not at the first insert.
            StreamCounter.objects.filter(pk=StreamCounter.SINGLETON_ID).update(value=F("value"))
        tallies = recomputed_tallies()
        ToolHealthBucket.objects.all().delete()
        ToolHealthBucket.objects.bulk_create(
            [
                ToolHealthBucket(
                    agent=agent, tool_id=tool_id, bucket=bucket_time(bucket), tally=tally
                )
                for (agent, tool_id, bucket), tally in tallies.items()
            ],
            batch_size=1000,
        )
    return len(tallies)
