"""The newest-first pages (``GET /api/v1/rounds``, the history, the live list) ask the newest
days' partitions first on PostgreSQL (issue 39: a merge of every day's index read ~38 indexes'
pages from disk at 100M events) and give the same rounds, in the same order, with the same
``next`` cursors as the order over every round: with rounds whose ``started_at`` moved past their
partition's day (a ``round.started`` arriving after other events of its round), filters that
fill no page from the newest days, ``since``, ``until`` and cursors deep in the month."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from observe.models import Round
from observe.partitions import partitioned, partitions_ensure
from observe.selectors import RoundFilter, encode_cursor, rounds_page
from tests.observe.live_support import HandRound, ingest

pytestmark = pytest.mark.django_db

#: More than the allowed clock skew (10 minutes) in the past: every round below starts before it.
BASE = datetime.now(UTC) - timedelta(minutes=20)
TODAY = BASE.date()


def _round(agent: str, turn: str, start: datetime, *, timeout: bool = False) -> None:
    hand = HandRound(agent=agent, turn_id=turn, start=start).started().call(0, "web.search")
    if timeout:
        hand.timeout(1, "web.fetch", None)
    ingest(hand.finished().events)


def _moved(turn: str, first_seen: datetime, started: datetime, agent: str = "main") -> None:
    """A round first stored from an event at ``first_seen`` (its partition's day), whose
    ``round.started`` at ``started`` arrives later."""
    early = HandRound(agent=agent, turn_id=turn, start=first_seen).call(0, "web.search")
    ingest(early.events)
    ingest(HandRound(agent=agent, turn_id=turn, start=started).started().events)


@pytest.fixture
def month() -> dict[str, Any]:
    """Rounds over twelve days, a few of them moved."""
    if partitioned():
        partitions_ensure([TODAY - timedelta(days=n) for n in range(13)])
    for day in range(12):
        for n in range(3 if day else 6):  # today's minutes apart, the others hours apart
            start = BASE - (
                timedelta(minutes=n * 2) if day == 0 else timedelta(days=day, hours=n * 3 + 1)
            )
            _round("main", f"d{day}-{n}", start, timeout=(day + n) % 3 == 0)
    for n in range(4):  # an agent seen only 9-10 days ago: the newest 8 days hold none of it
        _round("old", f"old-{n}", BASE - timedelta(days=9 + n // 2, hours=n))
    for n in range(3):  # and one seen 3-5 days ago
        _round("week", f"week-{n}", BASE - timedelta(days=3 + n))
    # Moved: stored on an older day, started (``round.started``) today and yesterday: the
    # newest of all, and one among yesterday's rounds.
    _moved("moved-today", BASE - timedelta(days=6), BASE + timedelta(minutes=1))
    _moved("moved-yesterday", BASE - timedelta(days=5), BASE - timedelta(days=1, minutes=30))
    # Moved back: stored today, their ``round.started`` 3 and 5 days earlier; their agent's other
    # rounds started 1 and 2 days ago (newer, on older days' partitions).
    for n in (3, 5):
        _moved(f"moved-back-{n}", BASE - timedelta(minutes=n), BASE - timedelta(days=n), "back")
    for n in (1, 2):
        _round("back", f"back-{n}", BASE - timedelta(days=n, hours=2))
    moved = Round.objects.filter(turn_id__startswith="moved").values_list("turn_id", "day")
    days = dict(moved)
    assert days["moved-today"] == (BASE - timedelta(days=6)).date()
    assert days["moved-yesterday"] == (BASE - timedelta(days=5)).date()
    return days


def _expected(round_filter: RoundFilter) -> list[Round]:
    rows = list(round_filter.apply(Round.objects.all()))
    return sorted(rows, key=lambda row: (row.started_at, row.pk), reverse=True)


def _walk(round_filter: RoundFilter, limit: int, keys_only: bool = False) -> list[Any]:
    """Every page, following ``next``: (turn ids, next cursor) each."""
    pages, cursor = [], None
    while True:
        rows, cursor = rounds_page(round_filter, limit=limit, before=cursor, keys_only=keys_only)
        pages.append(([row.turn_id for row in rows], cursor))
        if cursor is None:
            return pages


FILTERS = {
    "all": RoundFilter(),
    "agent seen 9-10 days ago": RoundFilter(agent="old"),
    "agent seen 3-5 days ago": RoundFilter(agent="week"),
    "agent of a round moved back": RoundFilter(agent="back"),
    "timeouts": RoundFilter(has=frozenset({"timeout"})),
    "since 2 days": RoundFilter(since=BASE - timedelta(days=2, hours=2)),
    "until yesterday": RoundFilter(until=BASE - timedelta(days=1)),
    "since and until": RoundFilter(
        since=BASE - timedelta(days=7), until=BASE - timedelta(days=2, hours=5)
    ),
    "main, since 8 days": RoundFilter(agent="main", since=BASE - timedelta(days=8)),
}


@pytest.mark.parametrize("name", FILTERS)
def test_every_page_is_the_order_over_every_round(month: dict[str, Any], name: str) -> None:
    round_filter = FILTERS[name]
    expected = _expected(round_filter)
    assert expected, name
    for limit in (1, 2, 3, 4, 5, 7, 9, 10, 50):
        want = []
        for first in range(0, max(len(expected), 1), limit):
            rows = expected[first : first + limit]
            more = len(expected) > first + limit
            want.append(([row.turn_id for row in rows], encode_cursor(rows[-1]) if more else None))
        assert _walk(round_filter, limit) == want, (name, limit)
    assert _walk(round_filter, 4, keys_only=True) == _walk(round_filter, 4)


def test_a_round_started_after_its_day_leads_the_newest_page(month: dict[str, Any]) -> None:
    # Today's partition alone fills a page of 3 with today's rounds; the round stored six
    # days ago whose ``round.started`` came today is newer than all of them.
    rows, _ = rounds_page(RoundFilter(), limit=3)
    assert [row.turn_id for row in rows] == ["moved-today", "d0-0", "d0-1"]
    rows, _ = rounds_page(RoundFilter(until=BASE - timedelta(days=1)), limit=4)
    assert "moved-yesterday" in [row.turn_id for row in rows]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the day partitions are PostgreSQL's")
def test_the_newest_page_reads_only_the_newest_days_partitions(month: dict[str, Any]) -> None:
    with CaptureQueriesContext(connection) as queries:
        rows, _ = rounds_page(RoundFilter(), limit=3)
    assert [row.turn_id for row in rows] == ["moved-today", "d0-0", "d0-1"]
    # Today's partition fills the page (yesterday's too, just after midnight). The older days
    # are asked only for their moved rounds (``round_moved``, migration 0015: their condition
    # is the index's), then those rounds by key from their own days' partitions.
    older = {TODAY - timedelta(days=n) for n in range(2, 13)}
    moved_days = {month["moved-today"], month["moved-yesterday"]}
    for query in queries:
        read = _days_read(query["sql"]) & older
        if "AT TIME ZONE 'UTC')::date" in query["sql"]:
            continue  # the moved rounds' keys
        assert read <= moved_days, (sorted(read), query["sql"])


def _days_read(sql: str) -> set[date]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        (found,) = cursor.fetchone()
    plan = (json.loads(found) if isinstance(found, str) else found)[0]["Plan"]
    return {
        date(int(name[-8:-4]), int(name[-4:-2]), int(name[-2:]))
        for name in _tables(plan)
        if name.startswith("observe_round_p")
    }


def _tables(plan: dict[str, Any]) -> set[str]:
    found = {str(plan["Relation Name"])} if "Relation Name" in plan else set()
    for child in plan.get("Plans", []):
        found |= _tables(child)
    return found


def test_more_moved_rounds_than_it_reads_apart_asks_every_day(
    month: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("observe.selectors.MOVED_MAX", 1)  # the month holds two
    for name in ("all", "until yesterday"):
        expected = [row.turn_id for row in _expected(FILTERS[name])]
        got = [turn for turns, _ in _walk(FILTERS[name], 3) for turn in turns]
        assert got == expected, name
