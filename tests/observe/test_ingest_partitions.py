"""Ingest on the partitioned PostgreSQL store stays flat as the store grows (issue 39): a batch
reads and writes its own days' partitions, and the other days' indexes are not probed per row.

Counted with PostgreSQL's own statistics of the test's transaction (``pg_stat_get_xact_numscans``:
each descent into an index), so what is asserted is the work the server did, not how the SQL
reads."""

from __future__ import annotations

import contextlib
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from observe import services, store
from observe.models import Event, Round
from observe.partitions import partition_name, partitions_ensure
from tests.observe.live_support import HandRound, ingest

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the partitioned layout is PostgreSQL's"
    ),
    pytest.mark.django_db,
]

#: The test's rounds start from here on, minutes apart, all more than the allowed clock skew
#: (10 minutes) in the past: hours after midnight, they were refused as future events whenever
#: the tests ran between midnight and 2 a.m. UTC.
BASE = datetime.now(UTC) - timedelta(minutes=20)
TODAY = BASE.replace(hour=0, minute=0, second=0, microsecond=0)


def index_scans(index: str) -> int:
    """Descents into ``index`` so far in this transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_numscans(%s::regclass)", [index])
        return int(cursor.fetchone()[0])


def reads(partition: str) -> int:
    """Scans of ``partition`` so far in this transaction: sequential, and of each of its indexes
    (a small partition's look-up may be planned either way)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_numscans(%s::regclass) + sum(pg_stat_get_xact_numscans("
            "indexrelid)) FROM pg_index WHERE indrelid = %s::regclass",
            [partition, partition],
        )
        return int(cursor.fetchone()[0])


def partitions_of_past_days(days: int) -> list[datetime]:
    past = [TODAY - timedelta(days=n) for n in range(1, days + 1)]
    partitions_ensure([moment.date() for moment in past])
    return past


def test_updating_stored_rounds_probes_only_their_days_partitions() -> None:
    (old_day, *_) = partitions_of_past_days(5)
    far = partition_name("observe_round", (old_day - timedelta(days=3)).date())
    hands = [
        HandRound(turn_id=f"t-held-{n}", start=BASE + timedelta(minutes=n))
        .started()
        .call(0, "react.read")
        for n in range(6)
    ]
    for hand in hands:
        ingest(hand.events)
    before = index_scans(f"{far}_pkey"), index_scans(f"{far}_version_day_key")
    # One batch: the six stored rounds go on, and three new ones start.
    more = [HandRound(turn_id=f"t-new-{n}", start=BASE + timedelta(minutes=7)) for n in range(3)]
    batch = [e for hand in hands for e in hand.generation().finished().events[-2:]]
    batch += [e for hand in more for e in hand.started().events]
    ingest(batch)
    after = index_scans(f"{far}_pkey"), index_scans(f"{far}_version_day_key")
    # Before: each round's UPDATE looked its id up in every day's primary key, and the new
    # rounds' ids were read back through every day's version index. Left: the re-check under
    # the lock, one descent to the end of each day's version index per batch, not per round.
    probed = (after[0] - before[0], after[1] - before[1])
    assert probed == (0, 1), f"{far}: primary key and version index probed {probed} times"
    assert Round.objects.filter(turn_id__startswith="t-held-", outcome__isnull=False).count() == 6
    assert Round.objects.filter(turn_id__startswith="t-new-").count() == 3


def test_the_repeat_look_up_asks_only_the_stored_rounds_days() -> None:
    partitions_of_past_days(2)
    yesterday, today = (
        f"{partition_name('observe_event', day.date())}_event_id_day_key"
        for day in (TODAY - timedelta(days=1), TODAY)
    )
    # Ten new rounds: none is stored, so none of their events can be a repeat while its round
    # is kept. Before: every id was looked for in today's, yesterday's and tomorrow's index.
    hands = [
        HandRound(turn_id=f"t-look-{n}", start=BASE + timedelta(minutes=n))
        .started()
        .call(0, "react.read")
        .call(1, "react.write")
        for n in range(10)
    ]
    batch = [e for hand in hands for e in hand.events]
    before = index_scans(yesterday), index_scans(today)
    result = ingest(batch)
    assert result.accepted == len(batch)
    assert (index_scans(yesterday), index_scans(today)) == before, "new rounds' ids looked up"
    # A round stored yesterday goes on today: its ids are looked for in yesterday's partition
    # (where its events are), the repeats of today's rounds in today's, each id once.
    late = HandRound(turn_id="t-look-late", start=BASE - timedelta(days=1)).started()
    ingest(late.events)
    late.now = BASE + timedelta(minutes=11)
    going_on = late.call(0, "react.read").events[-2:]
    repeats = batch[:5]
    before = index_scans(yesterday), index_scans(today)
    again = ingest(repeats + going_on)
    probes = index_scans(yesterday) - before[0], index_scans(today) - before[1]
    assert (again.accepted, again.duplicates) == (len(going_on), 5)
    assert probes[0] <= len(going_on), probes
    assert probes[1] <= len(repeats), probes
    stored = Round.objects.get(turn_id="t-look-late")
    assert stored.day == (TODAY - timedelta(days=1)).date()
    assert stored.events.count() == len(late.events)


def test_an_id_reused_by_another_round_of_the_same_day_is_refused() -> None:
    (yesterday,) = partitions_of_past_days(1)
    first = HandRound(turn_id="t-reuse-a", start=BASE).started()
    ingest(first.events)
    # Another round of today posts an event under the first round's id: not looked up (its
    # round is new), it collides with the stored copy in today's unique key; the retry finds it.
    other = HandRound(turn_id="t-reuse-b", start=BASE + timedelta(minutes=1)).started()
    reused = {**other.events[0], "event_id": first.events[0]["event_id"]}
    result = services.events_ingest([reused, *other.call(0, "react.read").events[1:]])
    assert result.rejected == [{"index": 0, "error": "event_id reused with different content"}]
    assert result.accepted == 2
    # Reused by a round kept in another day's partition: stored under both (docs/api.md).
    far = HandRound(turn_id="t-reuse-c", start=yesterday + timedelta(hours=2)).started()
    far_reused = {**far.events[0], "event_id": first.events[0]["event_id"]}
    assert ingest([far_reused]).accepted == 1
    assert Event.objects.filter(event_id=first.events[0]["event_id"]).count() == 2


def another_batch_at_the_lock(monkeypatch: pytest.MonkeyPatch, theirs: list[dict]) -> None:
    """The next batch of this thread, at the counter's lock (after its read and merge), lets
    another worker's batch of ``theirs`` commit first (from another thread, its own
    connection)."""
    locked = store.next_versions

    def another_batch_first(count: int) -> list[int]:
        # The other batch is another worker's: not this process's write turn (this batch holds
        # it), and it takes the counter's lock itself.
        monkeypatch.setattr(store, "next_versions", locked)
        monkeypatch.setattr(services, "_write_turn", contextlib.nullcontext)

        def post() -> None:
            try:
                ingest(theirs)
            finally:
                connection.close()

        worker = threading.Thread(target=post)
        worker.start()
        worker.join()
        return locked(count)

    monkeypatch.setattr(store, "next_versions", another_batch_first)


@pytest.mark.django_db(transaction=True)
def test_a_round_another_batch_changes_during_the_merge_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ingest merges before it takes the counter's lock: a batch that stores the same round in
    # between must not be overwritten by the first batch's merge, made from the round as it was
    # before.
    hand = HandRound(turn_id="t-race", start=BASE).started()
    ingest(hand.events)
    mine = hand.call(0, "react.read").events[-2:]
    theirs = hand.call(1, "react.write").events[-2:]
    another_batch_at_the_lock(monkeypatch, theirs)
    assert ingest(mine).accepted == len(mine)
    row = Round.objects.get(turn_id="t-race")
    assert row.events.count() == len(hand.events)
    assert set(row.assembly["tools"]) == {"react.read", "react.write"}


@pytest.mark.django_db(transaction=True)
def test_a_round_another_batch_stores_first_in_another_day_is_stored_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A round new to this batch (its calls, today) that another batch stores in between from
    # its start (yesterday, in yesterday's partition): the re-check under the lock finds it by
    # its version, and this batch's calls join it there. Missed, they are inserted as a second
    # round in today's partition, whose unique key does not reach yesterday's.
    (yesterday,) = partitions_of_past_days(1)
    hand = HandRound(turn_id="t-race-new", start=yesterday + timedelta(hours=2)).started()
    theirs = list(hand.events)
    hand.now = BASE
    mine = hand.call(0, "react.read").events[len(theirs) :]
    another_batch_at_the_lock(monkeypatch, theirs)
    assert ingest(mine).accepted == len(mine)
    row = Round.objects.get(turn_id="t-race-new")
    assert row.day == yesterday.date()
    assert row.events.count() == len(hand.events)
    assert row.assembly["tools"] == ["react.read"]


def test_the_look_ups_over_every_day_are_planned_once_per_connection() -> None:
    # Django turns psycopg's prepared statements off; the look-ups that ask every day's
    # partition were planned again on every batch (1.2–1.8 ms each at 38 days).
    keys = [("main", "t-planned", 0)]
    event_id = "00000000-0000-4000-8000-000000000001"
    for _ in range(3):
        store.held_rounds(keys)
        store.rounds_changed({}, keys, 0)
        # The repeat look-up in a held round's day (planned each time, pruning the days at plan
        # time cost 0.96 ms a batch).
        store.stored_event_data(
            [event_id], {event_id: (keys[0], BASE)}, days={keys[0]: TODAY.date()}
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%observe_round%%' OR statement LIKE '%%observe_event%%'"
        )
        plans = cursor.fetchall()
    # The three statements prepared (with any other look-up an earlier test of this connection
    # ran).
    assert len([generic for _, generic, _ in plans if generic >= 3]) >= 3, plans
    assert any("observe_event" in statement for statement, generic, _ in plans if generic >= 3)
    assert all(custom == 0 for _, _, custom in plans), plans


def test_a_batch_written_in_parts_stores_each_round_whole_or_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The write goes out in parts, pipelined (store.pipeline), with the tallies and round counts
    # behind it: each part's events and tool rows name the rounds of that part, and a part
    # refused after others were sent takes the whole batch back before its retry.
    from observe.health.tallies import recomputed_tallies, stored_tallies

    monkeypatch.setattr(store, "WRITE_PART_EVENTS", 5)
    first = HandRound(turn_id="t-parts-first", start=BASE).started()
    ingest(first.events)
    hands = [
        HandRound(turn_id=f"t-parts-{n}", start=BASE + timedelta(seconds=n))
        .started()
        .call(0, "react.read")
        .call(1, f"tool.{n % 3}")
        .generation()
        .finished()
        for n in range(12)
    ]
    batch = [e for hand in hands for e in hand.events]
    # The last part reuses the first round's id: it collides after the other parts are sent.
    batch[-1] = {**batch[-1], "event_id": first.events[0]["event_id"]}
    result = services.events_ingest(batch)
    assert result.rejected == [
        {"index": len(batch) - 1, "error": "event_id reused with different content"}
    ]
    assert result.accepted == len(batch) - 1
    for n, hand in enumerate(hands):
        row = Round.objects.get(turn_id=f"t-parts-{n}")
        assert row.events.count() == len(hand.events) - (n == len(hands) - 1)
        assert set(row.tools.values_list("tool_id", flat=True)) == {"react.read", f"tool.{n % 3}"}
    assert Event.objects.filter(event_id=first.events[0]["event_id"]).count() == 1
    assert stored_tallies() == recomputed_tallies()


def test_the_tally_read_does_not_grow_with_the_months_tallies() -> None:
    """A batch reads the tool-health rows it touches: the pages that read costs the server stay
    a handful when the table holds a month of every tool's buckets (before: the buckets were
    looked for through the whole (span, bucket) index, a read that grew with the month)."""
    from django.test.utils import CaptureQueriesContext

    from observe.models import ToolHealthBucket

    month = [TODAY - timedelta(days=d, minutes=5 * n) for d in range(1, 31) for n in range(288)]
    ToolHealthBucket.objects.bulk_create(
        ToolHealthBucket(agent="main", tool_id=tool, span=5, bucket=moment, tally={"calls": 1})
        for tool in ("react.read", "react.write")
        for moment in month
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE observe_toolhealthbucket")
    hand = HandRound(turn_id="t-tally", start=BASE).started().call(0, "react.read")
    hand.timeout(0, "react.read", None)
    with CaptureQueriesContext(connection) as queries:
        ingest(hand.events)
    (read,) = [
        q["sql"] for q in queries.captured_queries if q["sql"].startswith('SELECT "id", "agent"')
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {read}")
        (explained,) = cursor.fetchone()
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    pages = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    assert pages <= 24, f"the tally read touched {pages} pages for {plan['Actual Rows']} rows"
    assert ToolHealthBucket.objects.filter(bucket__gte=TODAY, tool_id="react.read").exists()


def test_a_round_going_on_is_looked_for_around_its_events_then_in_every_day() -> None:
    """A batch of rounds going on (their ``round.started`` stored before) asks the days around
    their events, not every day (the day partitions' round-key indexes were each probed for
    every round of every batch: 4,104 descents a batch of 1000 at 38 days); a round not found
    there is looked for in every day: one that ran for days is found where it is."""
    partitions_of_past_days(5)
    far_day = TODAY - timedelta(days=4)
    far = partition_name("observe_round", far_day.date())
    long = HandRound(turn_id="t-long", start=far_day + timedelta(hours=1)).started()
    ingest(long.call(0, "react.read").events)
    hands = [
        HandRound(turn_id=f"t-going-{n}", start=BASE + timedelta(minutes=n)).started()
        for n in range(5)
    ]
    ingest([e for hand in hands for e in hand.call(0, "react.read").events])
    before = reads(far)
    ingest([e for hand in hands for e in hand.generation().finished().events[-2:]])
    # Left: the re-check under the lock, one descent to the end of each day's version index
    # (its look-up of the held rounds by id asks their days only: with the days as an array,
    # a generic plan pruned none and read every day).
    assert reads(far) - before == 1, "rounds going on today looked for four days back"
    assert Round.objects.filter(turn_id__startswith="t-going-", outcome="ok").count() == 5
    # The long round goes on today: not in the days around its events, so every day is asked,
    # and its events join it where it is.
    long.now = BASE + timedelta(minutes=9)
    ingest(long.generation().finished().events[-2:])
    assert reads(far) - before > 1
    (row,) = Round.objects.filter(turn_id="t-long")
    assert (row.day, row.outcome) == (far_day.date(), "ok")
    assert row.events.count() == len(long.events)
