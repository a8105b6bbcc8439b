"""Ingest, read top to bottom in ``events_ingest``: parse → triage → merge → store → drift →
broadcast.

The runtime may send an event more than once and in any order: an ``event_id`` is stored once,
and each batch is merged into its rounds' assemblies, which never depend on arrival order. The
rules an event is held to are ``observe.domain.storable.check_storable``; the SQL is
``observe.store``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.vocabulary import ROUND_KINDS, ROUND_STARTED
from observe import store
from observe.domain.events import Event, EventError, parse_event, same_content, stored_event
from observe.domain.facts import RoundFacts
from observe.domain.health import Before, slots_before
from observe.domain.rounds import Assembly, assembly_merge, assembly_new, assembly_summary
from observe.domain.storable import check_storable
from observe.drift import Stored, check_drift_after_ingest
from observe.health import tool_health_change, tool_health_drop_before, tool_health_forget
from observe.models import Round
from observe.partitions import partition_days, partition_drop, partitioned
from observe.round_counts import (
    FORGET_VALUES,
    round_counts_drop_before,
    round_counts_forget,
    round_counts_record,
)
from observe.store import RoundKey, RoundWrite
from web.api_io import StoreBusy

logger = logging.getLogger(__name__)

LIVE_GROUP = "live-rounds"
REUSED_ID = "event_id reused with different content"
#: Rounds deleted per transaction by ``rounds_prune``: short write locks while the server runs.
PRUNE_BATCH = 500


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    change: Change | None = None

    @property
    def version(self) -> int | None:
        return self.change.version if self.change is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "rejected": self.rejected}


#: What triage keeps of each new event: its index in the batch, the event, and its JSON text
#: when the fast checks already produced it (``None``: the field encodes it).
Fresh = dict[str, tuple[int, Event, str | None]]


#: Valid events of a batch: index in the batch, the event, its JSON text (see :data:`Fresh`).
Parsed = list[tuple[int, Event, str | None]]

#: The batch's stored rounds, as read before the counter's lock (:func:`_merge`).
Held = Mapping[RoundKey, store.HeldRound]


def _latest_allowed() -> datetime:
    """The latest ``ts`` accepted now (the server's clock plus the allowed skew)."""
    skew = timedelta(seconds=settings.TRAITDECK_CLOCK_SKEW_S)
    try:
        return datetime.now(UTC) + skew
    except OverflowError:  # a window past year 9999: no limit
        return datetime.max.replace(tzinfo=UTC)


def _parse_all(raw_events: Sequence[Any]) -> tuple[Parsed, list[dict[str, Any]]]:
    """Check every event (outside any transaction: this is most of a batch's work); the valid
    ones, and the invalid ones reported by index."""
    parsed: Parsed = []
    rejected: list[dict[str, Any]] = []
    latest, skew_s = _latest_allowed(), settings.TRAITDECK_CLOCK_SKEW_S
    for index, raw in enumerate(raw_events):
        try:
            parsed.append((index, *check_storable(raw, latest=latest, skew_s=skew_s)))
        except EventError as exc:
            rejected.append({"index": index, "error": str(exc)})
    return parsed, rejected


#: How far around its events a round is looked for first, and before its ``round.started``
#: (docs/api.md, "Where a round is looked for").
ROUND_REACH = timedelta(days=1)


def round_days(parsed: Parsed) -> dict[RoundKey, store.Days]:
    """Where each round of a batch is looked for (``store.held_rounds``). A round lies in the
    day it started as first stored: its ``round.started``'s, or its earliest event's when that
    came first. A round the batch starts: from the day before its ``round.started`` on (the
    runtime stamps it before the round's other events) and, in every day, among the rounds
    stored without one (an earlier event may have stored it days before). A round going on:
    first within :data:`ROUND_REACH` of its events here (most rounds last seconds), then every
    day when it is not there (a round that ran for days)."""
    opened: dict[RoundKey, datetime] = {}
    first: dict[RoundKey, datetime] = {}
    last: dict[RoundKey, datetime] = {}
    for _, event, _ in parsed:
        key, ts = event.round_key, event.ts
        # Attempt 0's: a re-stream's may come a while after the round was stored.
        if (
            event.type == ROUND_STARTED
            and not event.attempt
            and (key not in opened or ts < opened[key])
        ):
            opened[key] = ts
        if key not in first or ts < first[key]:
            first[key] = ts
        if key not in last or ts > last[key]:
            last[key] = ts
    return {
        key: (_day_of(opened[key], -ROUND_REACH), None)
        if key in opened
        else (_day_of(first[key], -ROUND_REACH), _day_of(last[key], ROUND_REACH))
        for key in first
    }


def _day_of(moment: datetime, shift: timedelta) -> date:
    """The UTC day of ``moment`` + ``shift``, the calendar's first or last day past its ends."""
    try:
        return (moment + shift).astimezone(UTC).date()
    except OverflowError:
        return date.min if shift < timedelta(0) else date.max


def _triage(parsed: Parsed, result: IngestResult, held: Held, *, again: bool = False) -> Fresh:
    """Keep the new events, count duplicates, report a reused ``event_id`` by index.

    A repeated ``event_id`` is compared with the stored event when there is one, else with its
    first valid occurrence in the batch: the stored content is the truth once it exists.
    ``held``: the batch's stored rounds (where a repeat can be).
    """
    events = {event.event_id: (event.round_key, event.ts) for _, event, _ in parsed}
    days = {key: row.day for key, row in held.items()}
    stored = store.stored_event_data(list(events), events, days=days, wide=again)
    known: dict[str, Event] = {event_id: _stored(data) for event_id, data in stored}
    fresh: Fresh = {}
    for index, event, text in parsed:
        reference = known.get(event.event_id)
        if reference is None:
            known[event.event_id] = event
            fresh[event.event_id] = (index, event, text)
        elif same_content(reference, event):
            result.duplicates += 1
        else:
            result.rejected.append({"index": index, "error": REUSED_ID})
    result.rejected.sort(key=lambda item: item["index"])
    return fresh


def _stored(data: Any) -> Event:
    """A stored event, normalized as today's events are (as stored, if a later rule refuses it)."""
    try:
        return parse_event(data)
    except EventError:
        return stored_event(data)


@dataclass
class RoundChange:
    """One round a batch changed: its row, its facts before (None: new) and after."""

    pk: int
    before: RoundFacts | None
    after: RoundFacts

    def to_wire(self) -> list[Any]:
        return [
            self.pk,
            None if self.before is None else self.before.to_wire(),
            self.after.to_wire(),
        ]

    @classmethod
    def from_wire(cls, wire: Sequence[Any]) -> RoundChange:
        pk, before, after = wire
        return cls(
            int(pk),
            None if before is None else RoundFacts.from_wire(before),
            RoundFacts.from_wire(after),
        )


@dataclass
class Change:
    """What a committed batch changed, for the live view: versions ``first``..``version`` (one
    per round), and each round's facts before and after."""

    first: int
    version: int
    rounds: list[RoundChange]
    #: Each touched round as stored, by primary key (for the drift check; not sent).
    stored: dict[int, Stored] = field(default_factory=dict)

    def message(self) -> dict[str, Any]:
        """The channel message (``observe.live.stream`` reads it back)."""
        return {
            "type": "rounds.changed",
            "first": self.first,
            "version": self.version,
            "rounds": [entry.to_wire() for entry in self.rounds],
            # Tells one batch from another even where versions start again (a fresh database).
            "stamp": uuid.uuid4().hex,
        }


@dataclass
class Merged:
    """A batch merged into its rounds (inside the transaction, before anything is written)."""

    versions: list[int]
    rounds: list[RoundWrite]
    #: Each event's JSON text when the checks encoded it.
    texts: dict[str, str | None]
    facts: dict[RoundKey, tuple[RoundFacts | None, RoundFacts]]
    stored: dict[RoundKey, Stored]
    #: Per round: its agent, its touched slots before the merge and its assembly after (what
    #: the tool-health tallies take).
    health: list[tuple[str, Before, Assembly]]


def _merge(fresh: Fresh, held: Held, since: int, known_agents: frozenset[str] | None) -> Merged:
    """Merge the new events into the assembly of each round they touch (``held`` read after
    ``since``: :func:`observe.store.stored_version`).

    The work is the batch's, whatever the rounds already hold: each touched round's row is read
    once (with its assembly, by triage) and written once. Merging is order-independent, so
    arrival order never matters. The merge runs before the counter's lock, which serializes
    the batches' writes: under the lock, a batch whose rounds another batch changed since they
    were read reads them again and merges again (two workers on PostgreSQL then merge at the
    same time; the lock is held for the writes).
    """
    by_round: dict[RoundKey, list[Event]] = defaultdict(list)
    texts: dict[str, str | None] = {}
    for _, event, text in fresh.values():
        by_round[event.round_key].append(event)
        texts[event.event_id] = text
    keys = list(by_round)
    now = timezone.now()
    merged = _merged(keys, by_round, texts, held, known_agents, now)
    # The counter row is locked here until the commit: versions follow the commit order.
    merged.versions = store.next_versions(len(keys))
    if store.rounds_changed(held, keys, since):
        again = _merged(keys, by_round, texts, store.held_rounds(keys), known_agents, now)
        again.versions = merged.versions
        merged = again
    return merged


def _merged(
    keys: Sequence[RoundKey],
    by_round: Mapping[RoundKey, list[Event]],
    texts: dict[str, str | None],
    held: Held,
    known_agents: frozenset[str] | None,
    now: datetime,
) -> Merged:
    """The batch merged into the rounds as ``held`` has them (versions not yet taken)."""
    merged = Merged([], [], texts, {}, {}, [])
    for key in keys:
        row = held.get(key)
        state = row.assembly if row is not None and row.assembly else assembly_new()
        in_policy = row.in_policy if row is not None else True
        before = set(state["tools"])
        slots = slots_before(state, by_round[key])
        assembly_merge(state, by_round[key])
        merged.health.append((key[0], slots, state))
        summary = assembly_summary(state)
        if known_agents is not None:
            in_policy = key[0] in known_agents
        counts = [summary.counts[kind.counter] for kind in ROUND_KINDS]
        merged.facts[key] = (
            row.facts if row is not None else None,
            # The drift the row has now; the check after storing may change it.
            RoundFacts.of(
                key[0], summary.started_at, counts, state["tools"], row is not None and row.drift
            ),
        )
        merged.stored[key] = Stored(
            key[0],
            summary.policy_hash,
            summary.outcome is not None,
            row.drift if row is not None else None,
            state,
        )
        day = row.day if row is not None else summary.started_at.astimezone(UTC).date()
        merged.rounds.append(
            RoundWrite(
                key,
                row.pk if row is not None else None,
                store.round_values(summary, state, in_policy, now, day),
                by_round[key],
                sorted(summary.tool_ids - before),
                day,
            )
        )
    return merged


def _store(merged: Merged) -> Change:
    """Write the merged batch and fold it into the tool-health tallies; what it changed, for the
    drift check and the live view."""
    tallies = tool_health_change(rounds=merged.health)  # read before the writes are sent

    def counts() -> None:  # written while PostgreSQL writes the rounds (store.pipeline)
        tallies.write()
        round_counts_record(merged.facts.values())

    pks = store.batch_write(merged.rounds, merged.texts, merged.versions, counts)
    return Change(
        first=merged.versions[0],
        version=merged.versions[-1],
        rounds=[RoundChange(pks[key], old, new) for key, (old, new) in merged.facts.items()],
        stored={pks[key]: value for key, value in merged.stored.items()},
    )


def _drift(change: Change) -> None:
    """After storing (a failure there loses nothing), before telling the viewers (their cards
    then show the drift chip of a round that just finished)."""
    checked = check_drift_after_ingest(change.stored)
    for entry in change.rounds:
        if entry.pk in checked:
            entry.after = replace(entry.after, drift=checked[entry.pk] is True)


#: One batch of this process writes at a time: the others wait here, in turn, rather than in
#: SQLite's busy handler, which sleeps up to 100 ms between tries (a writer may sleep on while the
#: lock is free). Several processes still take the database's own lock.
_WRITE_LOCK = threading.Lock()
#: How long a batch waits for its turn: the database's own lock wait (5 s), then 503.
WRITE_WAIT_S = 5.0


@contextmanager
def _write_turn() -> Iterator[None]:
    if not _WRITE_LOCK.acquire(timeout=WRITE_WAIT_S):
        raise StoreBusy(f"ingest waited {WRITE_WAIT_S:g} s for the other batches being written")
    try:
        yield
    finally:
        _WRITE_LOCK.release()


def events_ingest(
    raw_events: Sequence[Any], *, known_agents: frozenset[str] | None = None
) -> IngestResult:
    """Store a batch: valid events are kept even when others are invalid (reported by index).

    ``known_agents``: the agents of the policy in force, to mark rounds "agent not in policy".
    """
    parsed, invalid = _parse_all(raw_events)  # parse: outside the transaction (most of the work)
    for attempt in (1, 2):
        result = IngestResult(rejected=list(invalid))
        try:
            with _write_turn(), transaction.atomic():
                # triage: new, repeated, or a reused event_id (again: looked for more widely)
                since = store.stored_version()  # dates the read (the merge's re-check)
                held = store.held_rounds(
                    list({event.round_key for _, event, _ in parsed}), round_days(parsed)
                )
                fresh = _triage(parsed, result, held, again=attempt == 2)
                if fresh:
                    # merge into each round's assembly
                    merged = _merge(fresh, held, since, known_agents)
                    result.change = _store(merged)  # store: rounds, events, tool rows
                    # Per-batch aggregates of other features are computed here, inside the
                    # transaction, from ``merged`` (its rounds and events), before the commit.
                result.accepted = len(fresh)
                store.ingest_count(
                    {
                        "accepted": result.accepted,
                        "duplicate": result.duplicates,
                        "refused": len(result.rejected),
                    }
                )
        except IntegrityError:
            # A concurrent batch stored one of these event_ids first: triage again, once.
            if attempt == 2:
                raise
            continue
        break
    if result.change is not None:
        _drift(result.change)  # drift: each finished round against the version it ran under
        broadcast_change(result.change)  # broadcast: one message to every live view
    return result


def broadcast_change(change: Change) -> None:
    """Tell the live views what this batch changed (each renders it once and fans it out)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(LIVE_GROUP, change.message())
    except Exception:  # the events are stored; viewers catch up when they notice the gap
        logger.exception("could not notify the live view of version %s", change.version)


def rounds_prune(*, older_than: datetime) -> int:
    """Delete the rounds that started before ``older_than``, with their events and tool rows,
    and take their calls out of the tool-health tallies.

    Returns how many rounds were deleted. On the partitioned layout (PostgreSQL) every day whose
    partition ends by ``older_than`` is dropped whole with the tallies before its end
    (:func:`observe.partitions.partition_drop`; ``prune_rounds`` with an age in days passes a
    midnight, so nothing is left to delete row by row). The rest (SQLite; on PostgreSQL rounds
    of a later partition that started before ``older_than``) go in batches, so
    that a large prune never holds the database's write lock for long while runtimes keep
    posting.
    """
    deleted, since = 0, None
    if partitioned():
        for day in partition_days():
            end = datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
            if end > older_than:
                break
            with transaction.atomic():
                store.hold_ingest_lock()
                deleted += partition_drop(day)
                tool_health_drop_before(end)
                round_counts_drop_before(end)
            since = end
    while True:
        with transaction.atomic():
            batch = list(
                Round.objects.filter(started_at__lt=older_than)
                .order_by("pk")
                .values_list("pk", flat=True)[:PRUNE_BATCH]
            )
            if not batch:
                return deleted
            # Their calls leave the tool-health tallies with them (else the Tools view would
            # keep counting calls whose rounds are gone, and a backfill would disagree).
            store.hold_ingest_lock()
            # One read of the batch serves both: (assembly, agent, started_at, *kind counters).
            rows = list(Round.objects.filter(pk__in=batch).values_list("assembly", *FORGET_VALUES))
            pruned = [(row[1], row[0]) for row in rows]
            counted = [row[1:] for row in rows]
            Round.objects.filter(pk__in=batch).delete()
            # After the delete: a tally whose slowest call leaves reads its max again from the
            # rounds that stay.
            tool_health_forget(rounds=pruned, since=since)
            round_counts_forget(counted, since=since)
        deleted += len(batch)
