"""The history's reads on PostgreSQL's partitioned store answer from indexes, whatever the
month of rounds holds: sorted by duration, the longest finished rounds are read in that order
from each day's index (a sort of every round was 1.4 s at 10M events)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from observe.selectors import RoundFilter, longest_rounds
from tests.observe.live_support import HandRound, ingest

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the partitioned layout is PostgreSQL's"
)


def _nodes(plan: dict[str, object]) -> list[str]:
    children = plan.get("Plans", [])
    assert isinstance(children, list)
    return [str(plan["Node Type"]), *(n for child in children for n in _nodes(child))]


@pytest.mark.django_db
def test_it_reads_the_longest_rounds_from_an_index_not_a_sort_of_every_round() -> None:
    start = timezone.now() - timedelta(days=1)
    for n, seconds in enumerate((3, 30, 1, 12)):
        hand = HandRound(turn_id=f"t{n}", start=start + timedelta(hours=n)).started()
        ingest(hand.add("round.finished", after_ms=seconds * 1000, outcome="ok").events)
    ingest(HandRound(turn_id="running", start=start).started().events)

    with CaptureQueriesContext(connection) as queries:
        rows = longest_rounds(RoundFilter(), limit=3)
    assert [row.turn_id for row in rows] == ["t1", "t3", "t0"]

    (query,) = queries
    with transaction.atomic(), connection.cursor() as cursor:
        # A handful of rows is cheaper to sort than to read from an index: tell the planner a
        # sort costs what it costs over a month, then check it has an index to read instead.
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
        (found,) = cursor.fetchone()
    plan = (json.loads(found) if isinstance(found, str) else found)[0]["Plan"]
    assert "Sort" not in _nodes(plan), plan
