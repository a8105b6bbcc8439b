"""A round from its events (observe.domain.rounds): facts, actions with their verdicts and
words, the API's round object and detail; order, repeats and batching never change it.

Over 500 lines on purpose: the module it tests is one on purpose (see its docstring), and the
example and property tests share its round builders."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.vocabulary import EARLY_PROFILE
from engine.round.overseer import (
    FINAL_AFTER_NON_NEUTRAL,
    MIXED_ACTIONS,
    NON_NEUTRAL_AFTER_FINAL,
    STRATEGY_INCOMPATIBLE,
    TOO_MANY_ACTIONS,
    Action,
    explain,
    explain_rejection,
    oversee,
)
from observe.domain.events import Event, parse_event
from observe.domain.rounds import (
    Assembly,
    Dedup,
    Timeout,
    assemble,
    assembly_merge,
    assembly_new,
    assembly_params,
    assembly_round,
    assembly_summary,
    recorded_round,
    round_detail_dict,
    round_to_dict,
)

START = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
HASH = "ab" * 32
FINGERPRINT = "40b78e51de2d48e9f19370949ed7eafe6594198e5a75bc7896e0cd02e0a4681f"


class Stream:
    """Builds the events of one round with fresh ids and times that grow by 100 ms."""

    def __init__(self, turn_id: str = "turn-1", iteration: int = 0) -> None:
        self.turn_id = turn_id
        self.iteration = iteration
        self.step = 0
        self.events: list[Event] = []

    def add(self, event_type: str, *, at: int | None = None, **fields: Any) -> Event:
        self.step += 1
        moment = START + timedelta(milliseconds=100 * (self.step if at is None else at))
        event = parse_event(
            {
                "event_id": str(uuid.UUID(int=self.step + 1000 * len(self.turn_id))),
                "ts": moment.isoformat(),
                "agent": "main",
                "turn_id": self.turn_id,
                "iteration": self.iteration,
                "type": event_type,
                **fields,
            }
        )
        self.events.append(event)
        return event


def conflict_round() -> Stream:
    """exploration accepted, exploitation rejected, the search runs: the textbook rejection."""
    s = Stream()
    s.add("round.started", max_actions=2, policy_hash=HASH)
    s.add("action.observed", action_index=0, action="call_tool", tool_id="a.search", params={})
    s.add("action.accepted", action_index=0, tool_id="a.search", strategy=["exploration"])
    s.add("action.observed", action_index=1, action="call_tool", tool_id="a.write", params={})
    s.add(
        "action.rejected",
        action_index=1,
        tool_id="a.write",
        code=STRATEGY_INCOMPATIBLE,
        extra={
            "strategy": ["exploitation"],
            "first_index": 0,
            "first_tool_id": "a.search",
            "first_strategy": ["exploration"],
        },
    )
    s.add("generation.finished")
    s.add("tool.started", action_index=0, tool_id="a.search", tool_call_id="c1")
    s.add(
        "tool.finished",
        action_index=0,
        tool_id="a.search",
        tool_call_id="c1",
        status="ok",
        duration_ms=80,
    )
    s.add("round.finished", outcome="ok")
    return s


def retry_round() -> Stream:
    """An early call in attempt 0, deduplicated by the ledger when attempt 1 re-streams."""
    s = Stream()
    s.add("round.started", max_actions=2)
    for attempt, index in ((0, 0), (1, 1)):
        s.add(
            "action.observed",
            attempt=attempt,
            action_index=index,
            action="call_tool",
            tool_id="react.delegate",
            params={"charter": "A"},
        )
        s.add("action.accepted", attempt=attempt, action_index=index, tool_id="react.delegate")
    s.add(
        "tool.early_started",
        action_index=0,
        tool_id="react.delegate",
        tool_call_id="tc_5ca55cec48db",
        fingerprint=FINGERPRINT,
    )
    s.add(
        "ledger.dedup",
        attempt=1,
        action_index=1,
        tool_id="react.delegate",
        tool_call_id="tc_5ca55cec48db",
        original_action_index=0,
        match="fingerprint",
        fingerprint=FINGERPRINT,
    )
    s.add("generation.finished", attempt=1)
    s.add(
        "tool.timeout",
        attempt=1,
        action_index=0,
        tool_id="a.export",
        tool_call_id="c9",
        limit_ms=2000,
        elapsed_ms=2012,
        async_alternative="a.export_async",
    )
    s.add("round.finished", outcome="failed")
    return s


def test_it_counts_a_duplicate_event_once() -> None:
    s = conflict_round()
    once = assemble(s.events)
    twice = assemble([*s.events, *s.events, s.events[3]])
    assert twice == once
    assert twice.counts["actions"] == 2
    assert len(twice.events) == len(s.events)


def test_it_counts_actions_as_distinct_attempt_and_index_pairs() -> None:
    assert assemble(retry_round().events).counts == {
        "actions": 3,  # (0, 0), (1, 1) and the timed-out (1, 0), seen only in its tool event
        "rejections": 0,
        "early_starts": 1,
        "dedups": 1,
        "timeouts": 1,
    }


def test_it_tells_which_kinds_a_round_shows() -> None:
    assert assemble(conflict_round().events).has == frozenset({"rejection"})
    assert assemble(retry_round().events).has == frozenset({"early", "dedup", "timeout"})


def test_it_reads_the_round_level_facts() -> None:
    r = assemble(conflict_round().events)
    assert (r.agent, r.turn_id, r.iteration) == ("main", "turn-1", 0)
    assert r.started_at == START + timedelta(milliseconds=100)
    assert r.generation_finished_at == START + timedelta(milliseconds=600)
    assert r.finished_at == START + timedelta(milliseconds=900)
    assert (r.outcome, r.policy_hash, r.max_actions) == ("ok", HASH, 2)
    assert r.tool_ids == frozenset({"a.search", "a.write"})


def test_it_shows_a_round_without_round_finished_as_in_progress() -> None:
    events = [e for e in conflict_round().events if e.type != "round.finished"]
    r = assemble(events)
    assert r.outcome is None
    assert r.finished_at is None


def test_it_starts_a_round_without_round_started_at_its_earliest_event() -> None:
    events = [e for e in conflict_round().events if e.type != "round.started"]
    r = assemble(reversed(events))
    assert r.started_at == START + timedelta(milliseconds=200)
    assert r.policy_hash is None
    assert r.max_actions is None


def test_it_dates_the_start_from_round_started_even_when_an_event_claims_earlier() -> None:
    s = conflict_round()
    s.add("action.observed", at=0, action_index=5, action="call_tool", tool_id="a.search")
    assert assemble(s.events).started_at == START + timedelta(milliseconds=100)


def test_it_orders_events_by_time_then_id() -> None:
    s = Stream()
    late = s.add("round.finished", at=9, outcome="ok")
    tie_b = s.add("generation.finished", at=3)
    tie_a = s.add("round.started", at=3, max_actions=2)
    ordered = assemble([late, tie_b, tie_a]).events
    assert [e.event_id for e in ordered] == sorted([tie_a.event_id, tie_b.event_id]) + [
        late.event_id
    ]


def test_it_puts_each_action_with_its_verdict_and_explanation() -> None:
    (attempt,) = assemble(conflict_round().events).attempts
    search, write = attempt.actions
    assert (search.index, search.verdict, search.strategy) == (0, "accepted", ("exploration",))
    assert (search.tool_call_id, search.status, search.duration_ms) == ("c1", "ok", 80)
    assert search.started_at == START + timedelta(milliseconds=700)
    assert search.finished_at == START + timedelta(milliseconds=800)
    assert (write.verdict, write.code) == ("rejected", STRATEGY_INCOMPATIBLE)
    assert write.explanation == (
        "a.search (exploration) was accepted first; a.write (exploitation) cannot follow it "
        "in the same round"
    )
    assert write.started_at is None


def test_it_words_a_rejection_with_the_action_that_arrived_after_it() -> None:
    s = Stream()
    s.add("action.rejected", action_index=0, tool_id=None, code=MIXED_ACTIONS)
    s.add("action.observed", action_index=0, action="think", tool_id=None)
    (action,) = assemble(s.events).attempts[0].actions
    assert action.explanation is not None
    assert action.explanation.startswith("'think' is not a supported action")


def test_it_words_a_rejection_whose_action_never_arrived() -> None:
    s = Stream()
    s.add("action.rejected", action_index=2, tool_id="a.write", code=TOO_MANY_ACTIONS)
    s.add("action.rejected", action_index=3, tool_id=None, code=MIXED_ACTIONS)
    first, second = assemble(s.events).attempts[0].actions
    assert first.explanation == (
        "the round allows at most 2 actions; a.write came after the round was full"
    )
    assert second.explanation is not None
    assert second.explanation.startswith("the action is not a supported action")


def test_it_groups_actions_by_attempt_with_the_ledger_story() -> None:
    r = assemble(retry_round().events)
    first, second = r.attempts
    assert first.attempt == 0
    assert first.generation_finished_at is None  # the provider dropped the stream
    (early,) = first.actions
    assert (early.early, early.ledger, early.tool_call_id) == (True, "started", "tc_5ca55cec48db")
    assert early.early_started_at is not None
    assert second.attempt == 1
    timed_out, dedup = second.actions
    assert (dedup.index, dedup.ledger, dedup.tool_call_id) == (1, "dedup", "tc_5ca55cec48db")
    assert dedup.dedup == Dedup(0, "fingerprint", FINGERPRINT)
    assert dedup.early_started_at is None
    assert timed_out.timeout == Timeout(2000, 2012, "a.export_async")
    assert (timed_out.status, timed_out.duration_ms) == ("timeout", 2012)
    assert r.generation_finished_at == second.generation_finished_at


def test_it_keeps_the_finished_status_of_a_call_that_also_timed_out() -> None:
    s = retry_round()
    s.add(
        "tool.finished",
        attempt=1,
        action_index=0,
        tool_id="a.export",
        tool_call_id="c9",
        status="error",
        duration_ms=2015,
    )
    for events in (s.events, list(reversed(s.events))):
        timed_out = assemble(events).attempts[1].actions[0]
        assert (timed_out.status, timed_out.duration_ms) == ("error", 2015)
        assert timed_out.timeout is not None


def test_it_lets_the_later_of_two_conflicting_events_win_whatever_the_order() -> None:
    s = conflict_round()
    s.add("round.finished", outcome="failed")
    for events in (s.events, list(reversed(s.events))):
        assert assemble(events).outcome == "failed"


def test_it_keeps_the_same_copy_of_a_repeated_id_with_other_content_whatever_the_order() -> None:
    s = conflict_round()
    last = s.events[-1]
    changed = parse_event({**last.data, "outcome": "failed"})
    assert assemble([*s.events, changed]) == assemble([changed, *s.events])


def test_it_refuses_events_of_two_rounds() -> None:
    other = Stream(turn_id="turn-2")
    other.add("generation.finished")
    with pytest.raises(ValueError, match="different rounds"):
        assemble([*conflict_round().events, *other.events])


def test_it_refuses_to_assemble_nothing() -> None:
    with pytest.raises(ValueError, match="at least one event"):
        assemble([])


def test_it_gives_the_api_round_object() -> None:
    r = assemble(conflict_round().events)
    assert round_to_dict(r, "/live/rounds/main/turn-1/0/", agent_in_policy=False) == {
        "agent": "main",
        "turn_id": "turn-1",
        "iteration": 0,
        "started_at": "2026-11-29T18:00:00.100Z",
        "finished_at": "2026-11-29T18:00:00.900Z",
        "outcome": "ok",
        "error_code": None,
        "error_message": None,
        "policy_hash": HASH,
        "agent_in_policy": False,
        "counts": {"actions": 2, "rejections": 1, "early_starts": 0, "dedups": 0, "timeouts": 0},
        "url": "/live/rounds/main/turn-1/0/",
    }
    assert round_to_dict(r, None)["agent_in_policy"] is True


def test_it_gives_the_detail_with_attempts_and_events() -> None:
    s = retry_round()
    detail = round_detail_dict(assemble(s.events), None)
    assert detail["events"][0]["type"] == "round.started"
    assert len(detail["events"]) == len(s.events)
    assert [a["attempt"] for a in detail["attempts"]] == [0, 1]
    dedup = detail["attempts"][1]["actions"][1]
    assert dedup["ledger"] == "dedup"
    assert dedup["dedup"] == {
        "original_action_index": 0,
        "match": "fingerprint",
        "fingerprint": FINGERPRINT,
    }
    assert detail["attempts"][0]["actions"][0]["early_started_at"] == "2026-11-29T18:00:00.600Z"
    timed_out = detail["attempts"][1]["actions"][0]
    assert timed_out["timeout"] == {
        "limit_ms": 2000,
        "elapsed_ms": 2012,
        "async_alternative": "a.export_async",
        "runtime_error_code": None,
    }
    assert detail["max_actions"] == 2
    assert detail["counts"]["timeouts"] == 1


TRAITS: dict[str, Mapping[str, Any]] = {
    "a.search": {"strategy": ["exploration"]},
    "a.write": {"strategy": ["exploitation"]},
    "a.plan": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)},
    "a.mixed": {"strategy": ["exploration", "neutral"]},
}


def call(tool_id: str) -> Action:
    return Action("call_tool", tool_id, {}, has_params=True)


@pytest.mark.parametrize(
    ("actions", "code"),
    [
        ([call("a.search"), call("a.write")], STRATEGY_INCOMPATIBLE),
        ([call("a.plan"), call("a.search"), call("a.write")], TOO_MANY_ACTIONS),
        ([call("a.mixed"), Action("exit", None)], FINAL_AFTER_NON_NEUTRAL),
        ([Action("complete", None), call("a.mixed")], NON_NEUTRAL_AFTER_FINAL),
        ([Action("think", None)], MIXED_ACTIONS),
    ],
)
def test_it_words_a_rejection_from_its_data_as_the_overseer_does(
    actions: Sequence[Action], code: str
) -> None:
    (verdict,) = [v for v in oversee(actions, lambda t, p: TRAITS.get(t)) if not v.accepted]
    assert verdict.code == code
    assert explain_rejection(
        code,
        verdict.extra,
        action=verdict.action.action,
        tool_id=verdict.action.tool_id,
        strategy=verdict.strategy,
    ) == explain(verdict)


def test_it_leaves_out_a_strategy_it_does_not_know() -> None:
    text = explain_rejection(
        NON_NEUTRAL_AFTER_FINAL,
        {"first_index": 0, "first_action": "exit"},
        action="call_tool",
        tool_id="a.write",
        strategy=(),
    )
    assert text.startswith("the final answer (exit) was accepted first; a.write cannot follow it")


# --- order independence ----------------------------------------------------------------------

TOOLS = ("a.search", "a.write", "react.delegate", None)


@st.composite
def event_streams(draw: st.DrawFn) -> list[Event]:
    """A valid stream for one round, of any mix of types — conflicting events included."""
    count = draw(st.integers(min_value=1, max_value=25))
    ids = draw(st.lists(st.uuids(), min_size=count, max_size=count, unique=True))
    events = []
    for event_id in ids:
        event_type = draw(
            st.sampled_from(
                (
                    "round.started",
                    "action.observed",
                    "action.accepted",
                    "action.rejected",
                    "tool.early_started",
                    "tool.started",
                    "tool.finished",
                    "ledger.dedup",
                    "tool.timeout",
                    "generation.finished",
                    "round.finished",
                )
            )
        )
        index = draw(st.integers(min_value=0, max_value=3))
        tool_id = draw(st.sampled_from(TOOLS))
        call_id = draw(st.sampled_from(("c1", "c2", "tc_5ca55cec48db")))
        payload: dict[str, Any] = {
            "round.started": {
                "max_actions": draw(st.integers(0, 3)),
                "policy_hash": draw(st.sampled_from((None, HASH))),
            },
            "action.observed": {
                "action_index": index,
                "action": draw(st.sampled_from(("call_tool", "complete", "think"))),
                "tool_id": tool_id,
                "params": {"q": draw(st.integers(0, 2))},
            },
            "action.accepted": {
                "action_index": index,
                "tool_id": tool_id,
                "strategy": draw(st.sampled_from((None, ["neutral"], ["exploration"]))),
            },
            "action.rejected": {
                "action_index": index,
                "tool_id": tool_id,
                "code": draw(st.sampled_from((STRATEGY_INCOMPATIBLE, MIXED_ACTIONS))),
                "extra": draw(st.sampled_from((None, {"first_index": 0}))),
            },
            "tool.early_started": {
                "action_index": index,
                "tool_id": tool_id,
                "tool_call_id": call_id,
                "fingerprint": FINGERPRINT,
            },
            "tool.started": {"action_index": index, "tool_id": tool_id, "tool_call_id": call_id},
            "tool.finished": {
                "action_index": index,
                "tool_id": tool_id,
                "tool_call_id": call_id,
                "status": draw(st.sampled_from(("ok", "error"))),
                "duration_ms": draw(st.integers(0, 5000)),
            },
            "ledger.dedup": {
                "action_index": index,
                "tool_id": tool_id,
                "tool_call_id": call_id,
                "original_action_index": draw(st.integers(0, 3)),
                "match": draw(st.sampled_from(("slot", "fingerprint"))),
                "fingerprint": FINGERPRINT,
            },
            "tool.timeout": {
                "action_index": index,
                "tool_id": tool_id,
                "tool_call_id": call_id,
                "limit_ms": 2000,
                "elapsed_ms": draw(st.integers(2000, 2100)),
                "async_alternative": draw(st.sampled_from((None, "a.async"))),
            },
            "generation.finished": {},
            "round.finished": {"outcome": draw(st.sampled_from(("ok", "retried", "failed")))},
        }[event_type]
        # Few distinct times, so that ties (broken by event_id) are common.
        at = START + timedelta(milliseconds=draw(st.integers(0, 6)) * 250)
        events.append(
            parse_event(
                {
                    "event_id": str(event_id),
                    "ts": at.isoformat(),
                    "agent": "main",
                    "turn_id": "t/1",
                    "iteration": 4,
                    "attempt": draw(st.integers(0, 2)),
                    "type": event_type,
                    **payload,
                }
            )
        )
    return events


@settings(max_examples=200, deadline=None)
@given(events=event_streams(), data=st.data())
def test_it_assembles_an_equal_round_whatever_the_order_and_duplication(
    events: list[Event], data: st.DataObject
) -> None:
    repeats = data.draw(st.lists(st.sampled_from(events), max_size=10))
    # A repeat may come back with ts as epoch ms: the same content in another form.
    resent = [
        parse_event({**e.data, "ts": int(e.ts.timestamp() * 1000)})
        for e in repeats[: len(repeats) // 2]
    ]
    shuffled = data.draw(st.permutations([*events, *repeats, *resent]))
    expected = assemble(events)
    assert assemble(shuffled) == expected
    assert round_detail_dict(assemble(shuffled), None) == round_detail_dict(expected, None)
    assert len(expected.events) == len(events)


@settings(max_examples=200, deadline=None)
@given(events=event_streams(), data=st.data())
def test_it_merges_batches_into_the_round_one_shot_assembly_gives(
    events: list[Event], data: st.DataObject
) -> None:
    """Ingest keeps a round's assembly and merges each batch into it: any split into batches, in
    any order, with repeats, stored as JSON between batches, gives the one-shot round."""
    repeats = data.draw(st.lists(st.sampled_from(events), max_size=10))
    shuffled = data.draw(st.permutations([*events, *repeats]))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(shuffled)), max_size=6)))
    state = assembly_new()
    for lo, hi in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        state = json.loads(json.dumps(assembly_merge(state, shuffled[lo:hi])))
    expected = assemble(events)
    merged = assembly_round(expected.key, state)
    assert merged == replace(expected, events=())
    assert assembly_summary(state).counts == expected.counts
    assert assembly_params(state) == {
        (e.attempt, e.data["action_index"]): e.data["params"]
        for e in sorted(events, key=lambda e: (e.ts, e.event_id), reverse=True)
        if e.type == "action.observed"
    }


def test_an_observed_action_names_the_tool_even_when_it_names_none() -> None:
    s = Stream()
    s.add("action.accepted", action_index=0, tool_id="a.search")
    s.add("action.observed", action_index=0, action="complete", tool_id=None)
    s.add("action.accepted", action_index=0, tool_id="a.write")
    for events in (s.events, list(reversed(s.events))):
        assert assemble(events).attempts[0].actions[0].tool_id is None
    # Until the observed action arrives, the earliest event that names a tool names it.
    assert assemble(s.events[::2]).attempts[0].actions[0].tool_id == "a.search"


@settings(max_examples=100, deadline=None)
@given(events=event_streams(), inferred=st.booleans())
def test_an_assembly_holds_only_what_its_record_declares(
    events: list[Event], inferred: bool
) -> None:
    """The merge writes no key the :class:`Assembly` record (which mypy checks readers against)
    leaves out; ``inferred`` only once an inferred event came; every mark starts with the
    event's time as sent and its id."""
    if inferred:
        events = [*events[:-1], parse_event({**events[-1].data, "inferred": True})]
    state = assembly_merge(assembly_new(), events)
    assert Assembly.__required_keys__ == set(assembly_new())
    assert Assembly.__optional_keys__ == {"inferred"}
    assert set(state) == Assembly.__required_keys__ | ({"inferred"} if inferred else set())
    ids = {event.event_id: event.data["ts"] for event in events}
    marks = [
        state["first"],
        state["start"],
        state["end"],
        *state["gen"].values(),
        *(mark for slot in state["slots"].values() for mark in slot.values()),
    ]
    for mark in marks:
        if mark is not None:
            assert ids[mark[1]] == mark[0]


def test_a_replayed_round_takes_the_code_channel_its_last_stream_reported() -> None:
    """Issue 37 §5: ``generation.finished``'s ``exec_code_complete`` of the last stream reaches
    the round drift and impact replay; not said, it stays out (they then predict both)."""
    stream = Stream()
    stream.add("round.started", max_actions=2)
    stream.add("action.observed", action_index=0, action="call_tool", tool_id="t.a", params={})
    stream.add("generation.finished", exec_code_complete=True)
    stream.add("generation.finished", attempt=1, exec_code_complete=False)
    key = ("main", "turn-1", 0)
    state = assembly_merge(assembly_new(), reversed(stream.events))
    found = recorded_round(key, state)
    assert found is not None
    assert found["exec_code_complete"] is False
    silent = Stream(turn_id="turn-2")
    silent.add("action.observed", action_index=0, action="call_tool", tool_id="t.a", params={})
    silent.add("generation.finished")
    found = recorded_round(("main", "turn-2", 0), assembly_merge(assembly_new(), silent.events))
    assert found is not None
    assert "exec_code_complete" not in found
