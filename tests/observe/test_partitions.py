"""The store's layout for volume (issue 39): on PostgreSQL rounds, tool rows and events are
partitioned by the round's day; a round and all its events share a partition even across
midnight, retention drops whole days, a repeated ``event_id`` is stored once while its round is
kept. Today's plain tables migrate with every row (both databases)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.timewindow import format_ts
from observe import round_counts
from observe.models import Event, Round, RoundTool, StreamCounter, ToolHealthBucket
from observe.partitions import forget_layout, partition_days, partition_name, partitioned
from observe.selectors import round_assembled
from observe.services import events_ingest, rounds_prune
from tests.observe.live_support import HandRound, ingest

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the partitioned layout is PostgreSQL's"
)

#: Midnight between two days the tests create partitions for (within the allowed clock skew).
MIDNIGHT = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def called(hand: HandRound, tool_id: str = "workspace_jobs.search") -> HandRound:
    """``hand`` started, calling ``tool_id`` once (its call finished after 400 ms), finished."""
    hand.started().call(0, tool_id, {"q": hand.turn_id})
    call = {"action_index": 0, "tool_id": tool_id, "tool_call_id": "call_0"}
    hand.add("tool.started", after_ms=900, **call)
    hand.add("tool.finished", after_ms=400, status="ok", duration_ms=400, **call)
    return hand.generation().finished()


def straddling(turn_id: str) -> HandRound:
    """A round that starts 1 s before ``MIDNIGHT`` and goes on after it."""
    return called(HandRound(turn_id=turn_id, start=MIDNIGHT - timedelta(seconds=1)))


def partitions_of(table: str, **where: Any) -> dict[str, int]:
    """Rows of ``table`` matching ``where`` per partition."""
    conditions = " AND ".join(f"{name} = %s" for name in where) or "true"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tableoid::regclass::text, count(*) FROM {table} WHERE {conditions} GROUP BY 1",
            list(where.values()),
        )
        return dict(cursor.fetchall())


@on_postgresql
@pytest.mark.django_db
def test_a_round_across_midnight_keeps_its_events_in_its_first_day() -> None:
    hand = straddling("t-midnight")
    ingest(hand.events[:3])
    ingest(hand.events[3:])  # after midnight, in a later batch
    row = Round.objects.get(turn_id="t-midnight")
    day = (MIDNIGHT - timedelta(days=1)).date()
    assert row.day == day
    assert partitions_of("observe_event", round_id=row.pk) == {
        partition_name("observe_event", day): len(hand.events)
    }
    assert partitions_of("observe_round", id=row.pk) == {partition_name("observe_round", day): 1}
    # The round page reads the events back whole (the stored JSON leaves out what the row holds).
    assert len(round_assembled(row).events) == len(hand.events)
    assert {e.event_id for e in round_assembled(row).events} == {e["event_id"] for e in hand.events}


@on_postgresql
@pytest.mark.django_db
def test_an_event_outside_every_partition_is_stored_and_upkeep_moves_it() -> None:
    old = datetime(2020, 3, 1, 12, tzinfo=UTC)
    hand = HandRound(turn_id="t-2020", start=old).started().call(0, "react.read")
    ingest(hand.events)
    row = Round.objects.get(turn_id="t-2020")
    assert partitions_of("observe_event", round_id=row.pk) == {
        "observe_event_default": len(hand.events)
    }
    from observe.partitions import partitions_ensure

    assert partitions_ensure([old.date()]) == [old.date()]
    assert partitions_of("observe_event", round_id=row.pk) == {
        partition_name("observe_event", old.date()): len(hand.events)
    }
    # A repeat still finds it where it went.
    again = events_ingest(hand.events)
    assert (again.accepted, again.duplicates) == (0, len(hand.events))


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_retention_drops_whole_days_with_their_tallies() -> None:
    kept = called(HandRound(turn_id="t-kept"))
    gone_at = MIDNIGHT - timedelta(days=3, hours=-2)
    gone = called(HandRound(turn_id="t-gone", start=gone_at))
    from observe.partitions import partitions_ensure

    partitions_ensure([gone_at.date()])
    ingest(gone.events)
    ingest(kept.events)
    assert ToolHealthBucket.objects.filter(bucket__lt=MIDNIGHT - timedelta(days=2)).exists()
    out = []
    call_command("prune_rounds", "--older-than", "2d", stdout=_Lines(out))
    assert "deleted 1 round" in out[0]
    assert gone_at.date() not in partition_days()
    assert list(Round.objects.values_list("turn_id", flat=True)) == ["t-kept"]
    assert Event.objects.count() == len(kept.events)
    assert not ToolHealthBucket.objects.filter(bucket__lt=MIDNIGHT - timedelta(days=2)).exists()
    assert ToolHealthBucket.objects.exists()
    # The next ingest is unaffected; the dropped round's ids are new again (stored once while
    # its round is kept).
    assert events_ingest(gone.events[:2]).accepted == 2


class _Lines:
    def __init__(self, out: list[str]) -> None:
        self.out = out

    def write(self, text: str) -> None:
        self.out.append(text)

    def flush(self) -> None:
        pass


def _batches(events: list[dict[str, Any]], seed: int, cuts: int) -> list[list[dict[str, Any]]]:
    """``events`` with some repeated, shuffled and cut into ``cuts`` + 1 batches."""
    rng = random.Random(seed)
    posted = events + rng.sample(events, k=len(events) // 2)
    rng.shuffle(posted)
    marks = sorted(rng.sample(range(1, len(posted)), k=min(cuts, len(posted) - 1)))
    return [posted[a:b] for a, b in zip([0, *marks], [*marks, len(posted)], strict=True)]


@on_postgresql
@pytest.mark.django_db
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), cuts=st.integers(0, 6))
def test_repeats_across_midnight_are_stored_once(rounds: int, seed: int, cuts: int) -> None:
    run = uuid.uuid4().hex[:8]
    hands = [straddling(f"p-{run}-{n}") for n in range(rounds)]
    events = [event for hand in hands for event in hand.events]
    accepted = duplicates = 0
    for batch in _batches(events, seed, cuts):
        result = events_ingest(batch, known_agents=frozenset({"main"}))
        assert not result.rejected
        accepted, duplicates = accepted + result.accepted, duplicates + result.duplicates
    assert accepted == len(events)
    assert duplicates == len(events) // 2
    ids = [
        str(e)
        for e in Event.objects.filter(round__turn_id__startswith=f"p-{run}-").values_list(
            "event_id", flat=True
        )
    ]
    assert sorted(ids) == sorted(e["event_id"] for e in events)
    for hand in hands:
        # The round's day is its start as first seen: yesterday, or today when its first
        # batch held only events after midnight. Every event is where the round is.
        row = Round.objects.get(turn_id=hand.turn_id)
        assert row.day in {MIDNIGHT.date() - timedelta(days=1), MIDNIGHT.date()}
        assert partitions_of("observe_event", round_id=row.pk) == {
            partition_name("observe_event", row.day): len(hand.events)
        }


def moved(turn_id: str) -> HandRound:
    """A round whose first events are stamped five days before its ``round.started`` (today,
    before ``MIDNIGHT``'s day ends): stored first from them, it lies in that earlier day."""
    hand = HandRound(turn_id=turn_id, start=MIDNIGHT - timedelta(days=5, hours=-1))
    hand.call(0, "react.read")
    hand.now = MIDNIGHT + timedelta(minutes=1)
    return hand.started().generation().finished()


@on_postgresql
@pytest.mark.django_db
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), cuts=st.integers(0, 6))
def test_rounds_stamped_days_before_they_started_are_stored_once(
    rounds: int, seed: int, cuts: int
) -> None:
    """A batch that starts a round looks for it from the day before its ``round.started`` on,
    and in every day among the rounds stored without one: whichever batch comes first, each
    round is one row with every event in its day."""
    from observe.partitions import partitions_ensure

    partitions_ensure([(MIDNIGHT - timedelta(days=n)).date() for n in range(6)])
    run = uuid.uuid4().hex[:8]
    hands = [moved(f"m-{run}-{n}") for n in range(rounds)]
    events = [event for hand in hands for event in hand.events]
    for batch in _batches(events, seed, cuts):
        assert not events_ingest(batch, known_agents=frozenset({"main"})).rejected
    for hand in hands:
        (row,) = Round.objects.filter(turn_id=hand.turn_id)
        # Stored first from its early events, it stays in their day, marked for the look-up.
        assert row.before_start is (row.day < row.started_at.astimezone(UTC).date())
        assert partitions_of("observe_event", round_id=row.pk) == {
            partition_name("observe_event", row.day): len(hand.events)
        }


# --- migration from today's layout ---------------------------------------------------------------

BEFORE = ("observe", "0009_toolhealth_censored_and_exact_max")
#: Each migrated round's three events: type and fields.
STEPS = (
    ("round.started", {"max_actions": 2}),
    (
        "action.observed",
        {"action_index": 0, "action": "call_tool", "tool_id": "react.read", "params": {"a": 1}},
    ),
    ("generation.finished", {}),
)


@pytest.mark.django_db(transaction=True)
def test_todays_layout_with_data_migrates_with_every_row() -> None:
    """Today's tables (as migration 0009 left them) with rounds, tool rows, events and tallies
    over three days; migrating keeps every row, and ingest and pages work on the result."""
    executor = MigrationExecutor(connection)
    old = executor.loader.project_state(BEFORE).apps
    models = [old.get_model("observe", name) for name in ("Round", "RoundTool", "Event")]
    with connection.schema_editor() as editor:
        for table in ("observe_event", "observe_roundtool", "observe_round"):
            editor.execute(
                f"DROP TABLE {table}" + (" CASCADE" if connection.vendor == "postgresql" else "")
            )
        for model in models:
            editor.create_model(model)
        # Made by a later migration (0012), which runs again below.
        editor.execute("DROP TABLE observe_roundcountbucket")
    forget_layout()
    recorder = MigrationRecorder(connection)
    later = [n for app, n in recorder.applied_migrations() if app == "observe" and n > BEFORE[1]]
    recorder.migration_qs.filter(app="observe", name__in=later).delete()

    old_round, old_tool, old_event = models
    made: list[tuple[str, int]] = []
    for number in range(12):
        started = MIDNIGHT - timedelta(days=number % 3, minutes=number)
        row = old_round.objects.create(
            agent="main",
            turn_id=f"m-{number}",
            iteration=0,
            started_at=started,
            version=number + 1,
            assembly={"tools": ["react.read"], "slots": {}},
        )
        old_tool.objects.create(round=row, tool_id="react.read")
        for step in range(3):
            event_id = str(uuid.uuid4())
            ts = started + timedelta(seconds=step)
            data = {
                "event_id": event_id,
                "type": STEPS[step][0],
                "ts": format_ts(ts),
                "agent": "main",
                "turn_id": f"m-{number}",
                "iteration": 0,
                "attempt": 0,
                "extra": {"n": number, "step": step},
                **STEPS[step][1],
            }
            old_event.objects.create(
                event_id=event_id, round=row, type=data["type"], ts=ts, data=data
            )
            made.append((event_id, number))
    StreamCounter.objects.update_or_create(pk=StreamCounter.SINGLETON_ID, defaults={"value": 12})
    ToolHealthBucket.objects.create(
        agent="main", tool_id="react.read", bucket=MIDNIGHT, tally={"calls": 12}
    )
    before = dict(old_event.objects.values_list("event_id", "data"))

    call_command("migrate", "observe", verbosity=0)
    forget_layout()

    assert partitioned() == (connection.vendor == "postgresql")
    assert Round.objects.count() == 12
    assert RoundTool.objects.count() == 12
    assert Event.objects.count() == len(made)
    assert ToolHealthBucket.objects.get().tally == {"calls": 12}
    # The round counts are filled from the migrated rounds (one minute each).
    assert round_counts.stored() == round_counts.recomputed()
    assert sum(counts[0] for counts in round_counts.stored().values()) == 12
    for row in Round.objects.all():
        assert row.day == row.started_at.astimezone(UTC).date()
        whole = {e.event_id: dict(e.data) for e in round_assembled(row).events}
        assert whole == {i: before[i] for i in whole}
        assert len(whole) == 3
    # Ingest goes on: a new round and a repeat of a migrated event.
    hand = HandRound(turn_id="after-migration").started()
    ingest(hand.events)
    repeat = events_ingest([before[made[0][0]]])
    assert (repeat.accepted, repeat.duplicates) == (0, 1)
    assert round_counts.stored() == round_counts.recomputed()


# --- a month, small (make test-scale): routing, retention, idempotency at volume ----------------


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_small_month_routes_every_event_prunes_a_day_and_stores_repeats_once() -> None:
    """``make bench-scale``'s store in small: simulator rounds through ingest on one day, copied
    over 30 days in SQL (~930k events, ~30 s); every event in its round's day partition, a repeat of
    any stored event counted as one, the oldest day dropped whole and ingest going on."""
    from observe.partitions import partitions_ensure
    from tests.bench import bench_scale

    base_day = MIDNIGHT - timedelta(days=bench_scale.DAYS - 1)
    partitions_ensure([base_day.date() + timedelta(days=d) for d in range(bench_scale.DAYS)])
    events = bench_scale.simulated(1000, base_day, bench_scale.SEED_HOURS * 3600 / 1000)
    for first in range(0, len(events), 1000):
        assert not events_ingest(events[first : first + 1000]).rejected
    (stride,) = bench_scale.sql("SELECT GREATEST(max(id), max(version)) + 1 FROM observe_round")[0]
    for first in (1, 34, 67):
        bench_scale.multiply(0, stride - 1, stride, first, first + 32)
    bench_scale.after_growth()
    total = Event.objects.count()
    assert total == len(events) * 100
    # Routing: each event in the partition of its round's day.
    misplaced = bench_scale.sql(
        "SELECT count(*) FROM observe_event e JOIN observe_round r ON r.id = e.round_id"
        " AND r.day = e.day WHERE e.tableoid::regclass::text"
        " <> 'observe_event_p' || to_char(r.day, 'YYYYMMDD')"
    )[0][0]
    orphans = (
        total
        - bench_scale.sql(
            "SELECT count(*) FROM observe_event e JOIN observe_round r ON r.id = e.round_id"
            " AND r.day = e.day"
        )[0][0]
    )
    assert (misplaced, orphans) == (0, 0)
    # The copies' round counts were kept as ingest keeps them.
    assert round_counts.stored() == round_counts.recomputed()
    # Idempotency: the seed's events again, shuffled into other batches, are all repeats.
    again = random.Random(39).sample(events, k=len(events))
    repeats = [events_ingest(again[first : first + 700]) for first in range(0, len(again), 700)]
    assert sum(r.duplicates for r in repeats) == len(events)
    assert sum(r.accepted for r in repeats) == 0
    assert Event.objects.count() == total
    # Retention: the oldest day goes whole, nothing else.
    oldest = partition_days()[0]
    day_rounds = Round.objects.filter(day=oldest).count()
    day_events = Event.objects.filter(day=oldest).count()
    assert day_rounds > 0
    end = datetime.combine(oldest + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    assert rounds_prune(older_than=end) == day_rounds
    assert oldest not in partition_days()
    assert Event.objects.count() == total - day_events
    assert not ToolHealthBucket.objects.filter(bucket__lt=end).exists()
    # The next ingest is unaffected.
    fresh = bench_scale.simulated(20, MIDNIGHT - timedelta(hours=1), 10.0)
    assert events_ingest(fresh).accepted == len(fresh)
    # Repeats, the day's drop and the next ingest kept the round counts exact.
    assert round_counts.stored() == round_counts.recomputed()
