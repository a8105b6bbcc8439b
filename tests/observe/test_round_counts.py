"""The round counts ingest keeps per agent and minute: equal to counting the rounds, whatever the
batching, repeats, order, kind changes and prunes; and the history chart and the live totals
read from them equal the same read from the rounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from observe import history_chart, round_counts
from observe.live.counters import _totals, counters_for, tally_for
from observe.models import Round, RoundCountBucket, ToolHealthBucket
from observe.selectors import RoundFilter
from observe.services import events_ingest, rounds_prune
from tests.observe.health.test_tallies import START, raw_events
from tests.observe.live_support import HandRound

NOW = START + timedelta(minutes=30)
FILTERS = (
    RoundFilter(),
    RoundFilter(agent="main"),
    RoundFilter(agent="other"),
    RoundFilter(since=START - timedelta(minutes=2)),
    RoundFilter(
        agent="main", since=START - timedelta(minutes=5), until=START + timedelta(minutes=6)
    ),
    # Buckets of several minutes (5 min; 3 h): the kept minutes summed per bucket.
    RoundFilter(since=START - timedelta(hours=5)),
    RoundFilter(agent="other", since=START - timedelta(days=6, minutes=3)),
)


def _fresh() -> None:
    Round.objects.all().delete()
    ToolHealthBucket.objects.all().delete()
    RoundCountBucket.objects.all().delete()


def _from_rounds(round_filter: RoundFilter) -> Any:
    """Today's read: the chart counted from the rounds."""
    with patch.object(history_chart, "counted", lambda _: False):
        return history_chart.rounds_chart(round_filter, now=NOW)


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=raw_events(), data=st.data())
def test_the_kept_counts_equal_counting_the_rounds(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    _fresh()
    for event in events:
        event["agent"] = data.draw(st.sampled_from(("main", "other")))
    # A repeated event_id is one event whatever its agent: keep its first agent.
    repeats = data.draw(st.lists(st.sampled_from(events), max_size=6))
    shuffled = data.draw(st.permutations([*events, *repeats]))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(shuffled)), max_size=5)))
    prune_after = data.draw(st.sampled_from([None, *cuts]))
    prune_at = START + timedelta(minutes=data.draw(st.integers(0, 9)))
    for lo, hi in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        if hi > lo:
            result = events_ingest(shuffled[lo:hi])
            assert not result.rejected, result.rejected
        if hi == prune_after:
            rounds_prune(older_than=prune_at)
        assert round_counts.stored() == round_counts.recomputed()
    # A minute left with no round keeps no row.
    assert not RoundCountBucket.objects.filter(rounds__lte=0).exists()
    for round_filter in FILTERS:
        assert history_chart.rounds_chart(round_filter, now=NOW) == _from_rounds(round_filter)
        matching = round_filter.apply(Round.objects.all())
        assert tally_for(round_filter, now=NOW).totals == list(_totals(matching))
        assert counters_for(round_filter, now=NOW).totals == _totals(matching)


@pytest.mark.django_db
def test_the_history_chart_and_the_live_totals_read_the_counts_not_the_rounds() -> None:
    """With the rounds' counts kept, the week's chart reads no round row but those of the minute
    it ends in: a round written without its counts (by hand) is not drawn unless in that
    minute."""
    events = [
        {
            "event_id": f"00000000-0000-4000-8000-00000000000{n}",
            "ts": (START + timedelta(minutes=n)).isoformat().replace("+00:00", "Z"),
            "agent": "main",
            "turn_id": f"t{n}",
            "iteration": 0,
            "attempt": 0,
            "type": "action.rejected",
            "action_index": 0,
            "tool_id": "web.search",
            "code": "max_actions",
        }
        for n in range(3)
    ]
    assert events_ingest(events).accepted == 3
    RoundCountBucket.objects.filter(minute=START).update(rounds=5, with_rejections=5)
    chart = history_chart.rounds_chart(RoundFilter(agent="main"), now=NOW)
    assert chart.total == 7
    assert chart.series[0].total == 7  # rounds with a rejection, the first kind
    tally = tally_for(RoundFilter(), now=NOW)
    assert tally.totals[0] == 7


@pytest.mark.django_db
def test_a_round_stored_with_a_start_ahead_of_the_clock_is_not_in_the_last_minute() -> None:
    # Ingest refuses a start past the allowed skew; an import or a clock set back can still
    # store one. It is counted in the totals, not in the last minute's rates.
    now = datetime.now(UTC)
    for n in range(3):
        hand = HandRound(turn_id=f"t-ahead-{n}", start=now - timedelta(seconds=20 + n))
        assert events_ingest(hand.started().events).accepted == 1
    Round.objects.filter(turn_id="t-ahead-2").update(started_at=now + timedelta(hours=2))
    tally = tally_for(RoundFilter(), now=now).counters(now)
    counters = counters_for(RoundFilter(), now=now)
    assert (tally.rounds, tally.rate_rounds) == (counters.rounds, counters.rate_rounds) == (3, 2)


@pytest.mark.django_db
def test_a_rebuild_gives_the_counts_ingest_keeps() -> None:
    """Rounds written around ingest (a bench's seed in SQL) get their counts from a rebuild."""
    events = [
        {
            "event_id": f"00000000-0000-4000-8000-0000000001{n:02d}",
            "ts": (START + timedelta(seconds=40 * n)).isoformat().replace("+00:00", "Z"),
            "agent": ("main", "other")[n % 2],
            "turn_id": f"t{n // 3}",
            "iteration": 0,
            "attempt": 0,
            "type": "action.rejected",
            "action_index": n % 3,
            "tool_id": "web.search",
            "code": "max_actions",
        }
        for n in range(12)
    ]
    assert events_ingest(events).accepted == 12
    kept = round_counts.stored()
    RoundCountBucket.objects.all().delete()
    assert round_counts.round_counts_rebuild() == len(kept)
    assert round_counts.stored() == kept == round_counts.recomputed()


@pytest.mark.django_db
def test_a_weeks_chart_reads_one_row_per_bucket_from_the_kept_minutes() -> None:
    """A week of kept minutes of two agents (20,160 rows) is summed per bucket by the database:
    the chart reads its 56 three-hour buckets, not every minute, and each bar holds its minutes'
    sum."""
    end = START + timedelta(days=7)
    RoundCountBucket.objects.bulk_create(
        RoundCountBucket(
            agent=agent, minute=START + timedelta(minutes=n), rounds=1 + n % 3, with_dedups=n % 2
        )
        for n in range(7 * 24 * 60)
        for agent in ("main", "other")
    )
    size = timedelta(hours=3)
    buckets = round_counts.counted_buckets(
        None, START, end, history_chart._bucket(START, size, "minute")
    )
    assert [bucket for bucket, _ in sorted(buckets)] == list(range(56))
    # 180 minutes a bucket: 60 each of 1, 2 and 3 rounds, 90 with a dedup; two agents.
    assert {sums["rounds"] for _, sums in buckets} == {2 * 360}
    assert {sums["with_dedups"] for _, sums in buckets} == {2 * 90}
    chart = history_chart.rounds_chart(RoundFilter(since=START, until=end), now=end)
    assert chart.bucket_text == "3 h"
    assert chart.total == 56 * 720
    assert next(s for s in chart.series if s.kind == "dedup").total == 56 * 180
