"""The bridge's bounded buffer: the oldest rounds are dropped whole when it is full, never a
round in flight, never half a round that was not yet posted; every event is accounted for."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kdcube.bridge.domain.buffer import RoundBuffer

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")


def ev(turn: str, n: int) -> dict[str, Any]:
    return {"event_id": f"{turn}-{n}", "agent": "main", "turn_id": turn, "iteration": 0}


def test_it_drops_the_oldest_rounds_whole_and_counts_them() -> None:
    buffer = RoundBuffer(5)
    buffer.add([ev("a", 1), ev("a", 2), ev("b", 1)])
    dropped = buffer.add([ev("c", 1), ev("c", 2), ev("c", 3)])
    assert (dropped.rounds, dropped.events) == (1, 2)  # round a, both events
    assert [e["event_id"] for e in buffer.take(10)] == ["b-1", "c-1", "c-2", "c-3"]


def test_a_dropped_round_stays_dropped() -> None:
    buffer = RoundBuffer(2)
    buffer.add([ev("a", 1), ev("b", 1), ev("b", 2)])
    assert buffer.add([ev("a", 2)]).events == 1
    assert [e["turn_id"] for e in buffer.take(10)] == ["b", "b"]


def test_a_round_in_flight_or_partly_posted_is_kept_over_one_never_posted() -> None:
    buffer = RoundBuffer(3)
    buffer.add([ev("a", 1), ev("a", 2)])
    flying = buffer.take(1)  # a-1 is being posted
    buffer.add([ev("b", 1), ev("b", 2), ev("b", 3)])
    assert buffer.drops.rounds == 1
    waiting = buffer.take(10)
    assert [e["event_id"] for e in waiting] == ["a-2"]  # b went, a (in flight) stayed
    buffer.done(flying + waiting)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 5), st.integers(1, 4)),
            st.tuples(st.just("take"), st.integers(1, 6), st.just(0)),
            st.tuples(st.just("done"), st.just(0), st.just(0)),
        ),
        max_size=40,
    ),
    st.integers(1, 8),
)
def test_every_event_is_taken_dropped_or_waiting(
    ops: list[tuple[str, int, int]], limit: int
) -> None:
    buffer = RoundBuffer(limit)
    added = taken = 0
    counter = 0
    flying: list[dict[str, Any]] = []
    for op, a, b in ops:
        if op == "add":
            events = [ev(f"t{a}", counter + i) for i in range(b)]
            counter += b
            added += b
            buffer.add(events)
        elif op == "take":
            batch = buffer.take(a)
            taken += len(batch)
            flying.extend(batch)
        else:
            buffer.done(flying)
            flying = []
        assert added == taken + buffer.drops.events + len(buffer)
