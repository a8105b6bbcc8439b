"""events_ingest: idempotent storage, the columns a round row keeps, versions, the live signal."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django.test.utils import CaptureQueriesContext

from observe.domain.events import parse_event
from observe.domain.rounds import assemble, assembly_round
from observe.models import Event, Round, RoundTool
from observe.services import LIVE_GROUP, REUSED_ID, events_ingest
from tests.observe.ingest_support import event, simulated_rounds, started

pytestmark = pytest.mark.django_db


def observed(index: int, tool_id: str | None = "a.search", **kwargs: Any) -> dict[str, Any]:
    return event(
        "action.observed",
        action_index=index,
        action="call_tool" if tool_id else "complete",
        tool_id=tool_id,
        **kwargs,
    )


def test_it_counts_accepted_duplicates_and_rejected() -> None:
    first, second = started(), observed(0)
    result = events_ingest([first, first, second, {"type": "bogus"}])
    assert (result.accepted, result.duplicates) == (2, 1)
    assert result.rejected == [{"index": 3, "error": result.rejected[0]["error"]}]
    assert "unknown event type 'bogus'" in result.rejected[0]["error"]
    assert result.to_dict() == {
        "accepted": 2,
        "duplicates": 1,
        "rejected": result.rejected,
    }


def test_a_repeat_is_judged_against_the_stored_event_not_an_earlier_repeat() -> None:
    stored = started()
    events_ingest([stored])
    changed = {**stored, "max_actions": 9}
    # The changed copy comes first in the batch; the faithful repeat after it is a duplicate.
    result = events_ingest([changed, stored])
    assert result.rejected == [{"index": 0, "error": REUSED_ID}]
    assert (result.accepted, result.duplicates) == (0, 1)


def test_a_stored_event_is_never_overwritten() -> None:
    stored = started()
    events_ingest([stored])
    events_ingest([{**stored, "max_actions": 9}])
    assert Event.objects.get(event_id=stored["event_id"]).data["max_actions"] == 2


def test_the_row_keeps_what_assembling_the_round_says() -> None:
    for events in simulated_rounds(25):
        events_ingest(events)
        expected = assemble(parse_event(e) for e in events)
        row = Round.objects.get(
            agent=expected.agent, turn_id=expected.turn_id, iteration=expected.iteration
        )
        columns = {
            name: getattr(row, name)
            for name in ("actions", "rejections", "early_starts", "dedups", "timeouts")
        }
        assert columns == dict(expected.counts)
        assert (row.started_at, row.finished_at, row.outcome) == (
            expected.started_at,
            expected.finished_at,
            expected.outcome,
        )
        assert row.generation_finished_at == expected.generation_finished_at
        assert set(row.tools.values_list("tool_id", flat=True)) == expected.tool_ids


def test_a_round_delivered_in_pieces_ends_with_the_same_row() -> None:
    (events,) = simulated_rounds(1, seed=3)
    for piece in reversed(range(0, len(events), 2)):
        events_ingest(events[piece : piece + 2])
    expected = assemble(parse_event(e) for e in events)
    row = Round.objects.get()
    assert row.started_at == expected.started_at
    assert row.actions == expected.counts["actions"]
    assert row.outcome == expected.outcome
    assert RoundTool.objects.filter(round=row).count() == len(expected.tool_ids)


def test_the_stored_assembly_is_the_one_shot_round_whatever_the_batches() -> None:
    rounds = simulated_rounds(6, seed=5)
    # Every round's events, shuffled together, re-sent in part, posted in batches of 7.
    mixed = [e for events in rounds for e in events]
    random.Random(2).shuffle(mixed)
    mixed += mixed[::5]
    for start in range(0, len(mixed), 7):
        events_ingest(mixed[start : start + 7])
    for events in rounds:
        expected = assemble(parse_event(e) for e in events)
        row = Round.objects.get(turn_id=expected.turn_id, iteration=expected.iteration)
        assert assembly_round(expected.key, row.assembly) == replace(expected, events=())


def test_a_batch_reads_the_round_row_not_its_events() -> None:
    (events,) = simulated_rounds(1, seed=4)
    events_ingest(events[:-1])
    with CaptureQueriesContext(connection) as queries:
        events_ingest(events[-1:])
    event_table = Event._meta.db_table
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and event_table in q["sql"]]
    # Only the duplicate check by event_id: the round's stored events are never read back.
    assert len(reads) == 1
    assert "event_id" in reads[0]


def test_the_agent_mark_follows_the_policy_given_at_each_ingest() -> None:
    events_ingest([started(agent="new")], known_agents=frozenset({"main"}))
    assert Round.objects.get().agent_in_policy is False
    # The agent was added to the policy: the round's next event re-marks it.
    events_ingest([observed(0, agent="new")], known_agents=frozenset({"main", "new"}))
    assert Round.objects.get().agent_in_policy is True


def test_without_a_policy_to_compare_the_round_counts_as_in_policy() -> None:
    events_ingest([started(agent="anyone")])
    assert Round.objects.get().agent_in_policy is True


def test_every_changed_round_takes_a_newer_version() -> None:
    events_ingest([started(turn_id="a"), started(turn_id="b")])
    first = dict(Round.objects.values_list("turn_id", "version"))
    assert len(set(first.values())) == 2
    result = events_ingest([observed(0, turn_id="a")])
    after = dict(Round.objects.values_list("turn_id", "version"))
    assert after["a"] > max(first.values())
    assert after["b"] == first["b"]
    assert result.version == after["a"]


def test_a_batch_of_only_duplicates_changes_no_version() -> None:
    batch = [started()]
    events_ingest(batch)
    version = Round.objects.get().version
    result = events_ingest(batch)
    assert result.version is None
    assert Round.objects.get().version == version


def test_it_tells_the_live_group_the_versions_and_facts_of_the_batch() -> None:
    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(LIVE_GROUP, channel)
    try:
        result = events_ingest([started()])
        message = async_to_sync(layer.receive)(channel)
    finally:
        async_to_sync(layer.group_discard)(LIVE_GROUP, channel)
    row = Round.objects.get()
    assert message["type"] == "rounds.changed"
    assert message["first"] == message["version"] == result.version == row.version
    # The facts before (none: a new round) and after, from which viewers keep their counters.
    assert message["rounds"] == [
        [row.pk, None, ["main", row.started_at.isoformat(), 0, 0, 0, 0, [], 0]]
    ]


def test_a_rejected_only_batch_tells_the_live_group_nothing() -> None:
    result = events_ingest([{"type": "bogus"}])
    assert result.version is None


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, {"nested": [math.nan]}],
    ids=["nan", "inf", "-inf", "nested-nan"],
)
def test_a_non_json_number_from_a_python_caller_is_rejected_not_a_crash(value: Any) -> None:
    # JSON has no NaN: SQLite's JSON check would refuse the row and fail the whole batch.
    result = events_ingest([{**observed(0), "params": {"x": value}}, started()])
    assert result.accepted == 1
    assert "must be a finite number" in result.rejected[0]["error"]


def test_a_non_json_value_from_a_python_caller_is_rejected() -> None:
    result = events_ingest([{**started(), "note": object()}])
    assert "note is not a JSON value" in result.rejected[0]["error"]


def test_a_final_answer_names_no_tool() -> None:
    events_ingest([started(), observed(0, tool_id=None)])
    assert not RoundTool.objects.exists()
    assert Round.objects.get().actions == 1


def test_where_a_batch_looks_its_rounds_up() -> None:
    """A round the batch starts: from the day before its ``round.started`` on (and, in every
    day, among the rows stored before it); a round going on, or re-streamed (a later attempt's
    ``round.started``): the days around its events first."""
    from datetime import UTC, date, datetime

    from observe.domain.storable import check_storable
    from observe.services import round_days

    posted = [
        started(turn_id="a", ts="2026-11-29T00:10:00Z"),
        event("generation.finished", turn_id="a", ts="2026-12-02T18:00:00Z"),
        event("generation.finished", turn_id="b", ts="2026-11-29T00:10:00Z"),
        event("round.finished", turn_id="b", outcome="ok", ts="2026-11-30T23:59:00Z"),
        started(turn_id="c", attempt=1, ts="2026-11-29T18:00:00Z"),
    ]
    latest = datetime(2027, 1, 1, tzinfo=UTC)
    parsed = [(n, *check_storable(raw, latest=latest, skew_s=0)) for n, raw in enumerate(posted)]
    assert round_days(parsed) == {
        ("main", "a", 0): (date(2026, 11, 28), None),
        ("main", "b", 0): (date(2026, 11, 28), date(2026, 12, 1)),
        ("main", "c", 0): (date(2026, 11, 28), date(2026, 11, 30)),
    }
