"""The tallies ingest keeps equal a recompute from the stored events, whatever the batching."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from observe.health.tallies import recomputed_tallies, stored_tallies, tool_health_backfill
from observe.models import Event, Round, ToolHealthBucket
from observe.services import events_ingest, rounds_prune

#: Four minutes before a bucket boundary, so a replaced event can move a call between buckets.
START = datetime(2026, 11, 29, 17, 56, tzinfo=UTC)
FINGERPRINT = "ab" * 32


@st.composite
def raw_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Events of two rounds, several per action slot: a slot may finish, time out, or both
    (twice, with other values), be rejected after an early start, or be deduplicated."""
    events: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(
            st.sampled_from(
                (
                    "action.observed",
                    "action.accepted",
                    "action.rejected",
                    "tool.early_started",
                    "tool.finished",
                    "tool.timeout",
                    "ledger.dedup",
                )
            )
        )
        index = draw(st.integers(0, 2))
        tool = draw(st.sampled_from(("web.search", "db.write")))
        payload: dict[str, Any] = {"action_index": index, "tool_id": tool}
        if kind == "action.observed":
            payload |= {"action": "call_tool", "params": {}}
        elif kind == "action.accepted":
            payload |= {"strategy": ["neutral"]}
        elif kind == "action.rejected":
            payload |= {"code": draw(st.sampled_from(("strategy_incompatible", "max_actions")))}
        elif kind == "tool.early_started":
            payload |= {"tool_call_id": "c", "fingerprint": FINGERPRINT}
        elif kind == "tool.finished":
            payload |= {
                "tool_call_id": "c",
                "status": draw(st.sampled_from(("ok", "error"))),
                "duration_ms": draw(st.floats(0, 86_400_000) | st.integers(0, 400)),
            }
        elif kind == "tool.timeout":
            payload |= {
                "tool_call_id": "c",
                "limit_ms": 2000,
                "elapsed_ms": draw(st.integers(1000, 2100)),
                "async_alternative": None,
            }
        else:
            payload |= {
                "tool_call_id": "c",
                "original_action_index": 0,
                "match": "slot",
                "fingerprint": FINGERPRINT,
            }
        at = START + timedelta(seconds=draw(st.integers(0, 8)) * 60)
        events.append(
            {
                "event_id": str(uuid.UUID(int=draw(st.integers(0, 2**32)))),
                "ts": at.isoformat().replace("+00:00", "Z"),
                "agent": "main",
                "turn_id": draw(st.sampled_from(("t1", "t2"))),
                "iteration": 0,
                "attempt": draw(st.integers(0, 1)),
                "type": kind,
                **payload,
            }
        )
    # A repeated event_id with other content is refused by ingest: keep the first of each.
    unique = {event["event_id"]: event for event in reversed(events)}
    return list(unique.values())


def five_minute(tallies: dict[tuple[str, str, str], dict[str, int]]) -> list[dict[str, int]]:
    """The 5-minute tallies (each count is also kept in its hour's tally)."""
    return [tally for (_, _, bucket), tally in tallies.items() if len(bucket) == 16]


def _fresh() -> None:
    Round.objects.all().delete()
    ToolHealthBucket.objects.all().delete()


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=raw_events(), data=st.data())
def test_it_keeps_the_tallies_a_recompute_gives_after_repeats_and_any_order(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    _fresh()
    repeats = data.draw(st.lists(st.sampled_from(events), max_size=6))
    shuffled = data.draw(st.permutations([*events, *repeats]))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(shuffled)), max_size=5)))
    for lo, hi in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        if hi > lo:
            result = events_ingest(shuffled[lo:hi])
            assert not result.rejected, result.rejected
    kept = stored_tallies()
    assert kept == recomputed_tallies()
    # A call that moved to another bucket leaves no row behind counting nothing.
    assert not ToolHealthBucket.objects.filter(tally={}).exists()
    # The definition, counted directly from the events: a slot that finished or timed out.
    slots = {
        (e["turn_id"], e["attempt"], e["action_index"])
        for e in events
        if e["type"] in ("tool.finished", "tool.timeout")
    }
    assert sum(tally.get("calls", 0) for tally in five_minute(kept)) == len(slots)
    hourly = [tally for (_, _, bucket), tally in kept.items() if len(bucket) == 13]
    assert sum(tally.get("calls", 0) for tally in hourly) == len(slots)
    timed_out = {
        (e["turn_id"], e["attempt"], e["action_index"])
        for e in events
        if e["type"] == "tool.timeout"
    }
    assert sum(tally.get("timeouts", 0) for tally in five_minute(kept)) == len(timed_out)


def _call(turn: str, index: int, kind: str, at: datetime, **fields: Any) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "ts": at.isoformat().replace("+00:00", "Z"),
        "agent": "main",
        "turn_id": turn,
        "iteration": 0,
        "type": kind,
        "action_index": index,
        "tool_id": "web.search",
        "tool_call_id": "c",
        **fields,
    }


@pytest.mark.django_db
def test_it_counts_a_call_reported_both_ways_once_as_a_timeout() -> None:
    finished = _call("t", 0, "tool.finished", START, status="ok", duration_ms=1900)
    timeout = _call(
        "t", 0, "tool.timeout", START, limit_ms=2000, elapsed_ms=2000, async_alternative=None
    )
    events_ingest([finished])
    events_ingest([timeout])
    (tally,) = five_minute(stored_tallies())
    assert tally == {"calls": 1, "timeouts": 1, "at_limit": 1, "limit_ms": 2000, "c:2000": 1}


@pytest.mark.django_db
def test_it_backfills_the_tallies_from_stored_events_and_a_rerun_changes_nothing() -> None:
    events_ingest(
        [_call("t", i, "tool.finished", START, status="ok", duration_ms=10 * i) for i in range(5)]
    )
    expected = stored_tallies()
    ToolHealthBucket.objects.all().delete()  # a database from before the tallies existed
    assert Event.objects.count() == 5
    call_command("toolhealth_backfill", verbosity=0)
    assert stored_tallies() == expected
    assert tool_health_backfill() == 2  # the 5-minute bucket and its hour
    assert stored_tallies() == expected


@pytest.mark.django_db
def test_it_refuses_an_absurd_duration_by_index_and_never_counts_it() -> None:
    good = _call("t", 0, "tool.finished", START, status="ok", duration_ms=50)
    negative = _call("t", 1, "tool.finished", START, status="ok", duration_ms=-5)
    too_long = _call(
        "t", 2, "tool.timeout", START, limit_ms=1000, elapsed_ms=90_000_000, async_alternative=None
    )
    result = events_ingest([good, negative, too_long])
    assert result.accepted == 1
    assert [item["index"] for item in result.rejected] == [1, 2]
    assert result.rejected[0]["error"] == "duration_ms must be a number ≥ 0, got -5"
    assert result.rejected[1]["error"].startswith("elapsed_ms must be at most 86400000 ms")
    (tally,) = five_minute(stored_tallies())
    assert tally["calls"] == 1


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=raw_events(), minutes=st.integers(0, 9))
def test_pruning_rounds_takes_their_calls_out_of_the_tallies(
    events: list[dict[str, Any]], minutes: int
) -> None:
    _fresh()
    events_ingest(events)
    cutoff = START + timedelta(minutes=minutes)
    kept_rounds = Round.objects.filter(started_at__gte=cutoff).count()
    rounds_prune(older_than=cutoff)
    assert Round.objects.count() == kept_rounds
    # What the remaining events give, and no row left counting nothing.
    assert stored_tallies() == recomputed_tallies()
    assert not ToolHealthBucket.objects.filter(tally={}).exists()


@pytest.mark.django_db
def test_pruning_every_round_leaves_no_tally() -> None:
    _fresh()
    events_ingest([_call("old", 0, "tool.finished", START, status="ok", duration_ms=5)])
    assert ToolHealthBucket.objects.count() == 2  # the 5-minute bucket and its hour
    call_command("prune_rounds", "--older-than", "1h", verbosity=0)
    assert Round.objects.count() == 0
    assert ToolHealthBucket.objects.count() == 0
