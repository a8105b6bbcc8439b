"""The live counters never scan the round rows (wide with their assemblies): they scan a covering
index or search a range. With 100k rounds a scan of the rows (a drift count the covering index
lacked) made the first render of /live/ take 130 ms instead of 50 ms."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from observe.live.counters import counters_for
from observe.selectors import RoundFilter

pytestmark = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite's plans (PostgreSQL's follow its statistics)"
)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "round_filter",
    [RoundFilter(), RoundFilter(agent="main"), RoundFilter(has=frozenset({"drift"}))],
    ids=["all", "agent", "has-drift"],
)
def test_the_counters_never_scan_the_rows(round_filter: RoundFilter) -> None:
    with CaptureQueriesContext(connection) as queries:
        counters_for(round_filter)
    # The totals (from the kept per-minute counts and the drifted rounds' index, or from the
    # covering index) and the last minute's.
    assert len(queries) == (2 if round_filter.has else 3)
    with connection.cursor() as cursor:
        for query in queries:
            cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
            steps = [str(row[-1]) for row in cursor.fetchall()]
            scans = [
                s
                for s in steps
                if s.startswith("SCAN")
                and "COVERING INDEX" not in s
                and "observe_roundcountbucket" not in s  # a row per agent and minute
            ]
            assert not scans, f"{query['sql']}\n→ {steps}"
