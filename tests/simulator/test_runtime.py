from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.vocabulary import EARLY_PROFILE
from engine.round.ledger import fingerprint, tool_call_id
from engine.round.overseer import Action, Overseer
from engine.tools.resolution import resolve_agent
from engine.traits.round_policy import RoundPolicy
from observe.domain.events import Event, parse_event
from observe.domain.rounds import AssembledRound, assemble
from simulator.runtime import Simulator, simulate_round
from simulator.scenarios import SCENARIOS

NOW = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
HASH = "cd" * 32

#: Exploration, exploitation, an early neutral tool and a tool with a short timeout_s; a named
#: service whose namespace override makes search neutral.
POLICY: dict[str, Any] = {
    "surfaces": {
        "as_consumer": {
            "agents": {
                "main": {
                    "tools": [
                        {
                            "name": "workspace_jobs",
                            "kind": "python",
                            "ref": "tools/workspace_jobs.py",
                            "alias": "workspace_jobs",
                            "allowed": ["search", "export_report", "launch_background_job"],
                            "tool_traits": {
                                "search": {"strategy": ["exploration"]},
                                "export_report": {"strategy": ["exploitation"]},
                                "launch_background_job": {
                                    "strategy": ["neutral"],
                                    "execution": dict(EARLY_PROFILE),
                                },
                            },
                            "tool_execution": {
                                "export_report": {
                                    "timeout_s": 2,
                                    "mode": "sync",
                                    "retry": "idempotency_key",
                                    "async_alternative": "workspace_jobs.launch_background_job",
                                }
                            },
                        },
                        {
                            "kind": "named_service",
                            "alias": "named_services",
                            "namespaces": {
                                "task": {
                                    "allowed": ["object.search", "object.upsert"],
                                    "tool_traits": {"search_objects": {"strategy": ["neutral"]}},
                                }
                            },
                            "tool_traits": {
                                "search_objects": {"strategy": ["exploration"]},
                                "upsert_object": {"strategy": ["exploitation"]},
                            },
                        },
                    ]
                },
                "helper": {"tools": []},
            }
        }
    }
}
RESOLUTION = resolve_agent(POLICY, "main")


def rounds(seed: int = 1, count: int = 40, **options: Any) -> list[list[dict[str, Any]]]:
    simulator = Simulator(POLICY, seed=seed, **options)
    return [simulator.next_round(NOW + timedelta(minutes=n))[1] for n in range(count)]


def one(
    scenario: str, seed: int = 0, resolution: Any = RESOLUTION, age_s: float = 0.0
) -> list[dict[str, Any]]:
    return simulate_round(
        resolution,
        rng=random.Random(seed),
        agent="main",
        turn_id="turn-1",
        iteration=0,
        start=NOW,
        policy_hash=HASH,
        scenario=scenario,
        age_s=age_s,
    )


def parsed(events: list[dict[str, Any]]) -> list[Event]:
    return [parse_event(event) for event in events]


def of_type(events: list[Event], event_type: str) -> Iterator[Event]:
    return (event for event in events if event.type == event_type)


ROUNDS = rounds()
PARSED = [parsed(events) for events in ROUNDS]
ASSEMBLED: list[AssembledRound] = [assemble(events) for events in PARSED]


def test_it_emits_only_events_that_parse() -> None:
    # parse_event raises on the first invalid one; every round is one round.
    assert sum(len(events) for events in PARSED) > 300
    assert all(len({e.round_key for e in events}) == 1 for events in PARSED)


def test_it_shows_every_kind_within_forty_rounds() -> None:
    kinds: Counter[str] = Counter(kind for r in ASSEMBLED for kind in r.has)
    assert set(kinds) == {"rejection", "early", "dedup", "timeout"}
    outcomes = Counter(r.outcome for r in ASSEMBLED)
    assert outcomes["ok"] > outcomes["failed"] > 0


@pytest.mark.parametrize("seed", [2, 3, 4, 5])
def test_it_shows_every_kind_for_other_seeds_too(seed: int) -> None:
    seen = {kind for events in rounds(seed) for kind in assemble(parsed(events)).has}
    assert seen == {"rejection", "early", "dedup", "timeout"}


def test_it_replays_the_same_rounds_for_the_same_seed() -> None:
    assert rounds(count=10) == ROUNDS[:10]
    assert rounds(seed=2, count=10) != ROUNDS[:10]


def test_it_makes_fresh_event_ids() -> None:
    ids = [event.event_id for events in PARSED for event in events]
    assert len(ids) == len(set(ids))


def test_it_starts_every_round_with_the_runtime_cap_and_the_policy_hash() -> None:
    events = rounds(count=3, policy_hashes={"main": HASH})
    for round_events in events:
        first = round_events[0]
        assert first["type"] == "round.started"
        assert first["max_actions"] == 2
    assert {e[0]["policy_hash"] for e in events} == {HASH, None}  # helper has no hash given


def test_it_reports_the_multi_action_mode_each_round_ran_with() -> None:
    # The simulator plays v3 with multi-action on (issue 37: every chip shows).
    modes = Counter(events[0]["multi_action_mode"] for events in ROUNDS)
    assert set(modes) == {"on"}
    assert {one("retry", seed)[0]["multi_action_mode"] for seed in range(5)} == {"on"}
    assert {one("conflict", seed)[0]["multi_action_mode"] for seed in range(5)} == {"on"}


def test_it_returns_events_in_time_order_from_start_to_finish() -> None:
    for events in PARSED:
        times = [e.ts for e in events]
        assert times == sorted(times)
        assert (events[0].type, events[-1].type) == ("round.started", "round.finished")


def test_it_starts_an_early_call_before_generation_finishes() -> None:
    pairs = 0
    for events in PARSED:
        finished = {e.attempt: e.ts for e in of_type(events, "generation.finished")}
        for early in of_type(events, "tool.early_started"):
            # A dropped attempt has no generation.finished; its retry's comes later still.
            later = [ts for attempt, ts in finished.items() if attempt >= early.attempt]
            assert later
            assert all(early.ts < ts for ts in later)
            pairs += 1
    assert pairs > 0


def test_it_starts_early_calls_with_the_ledger_ids() -> None:
    for events in PARSED:
        observed = {(e.attempt, e.action_index): e.data for e in of_type(events, "action.observed")}
        for early in of_type(events, "tool.early_started"):
            action = observed[(early.attempt, early.action_index)]
            assert early.action_index is not None
            assert early.data["tool_call_id"] == tool_call_id(
                early.turn_id, early.iteration, early.action_index
            )
            assert early.data["fingerprint"] == fingerprint(action["tool_id"], action["params"])


def test_it_dedups_with_the_original_calls_id_and_index() -> None:
    dedups = 0
    for events in PARSED:
        started = {
            e.data["tool_call_id"]: (e.attempt, e.action_index)
            for e in of_type(events, "tool.early_started")
        }
        for dedup in of_type(events, "ledger.dedup"):
            # A retry finds the first attempt's call; an identical sibling in the same stream
            # finds the one before it.
            attempt, index = started[dedup.data["tool_call_id"]]
            assert attempt <= dedup.attempt
            assert index == dedup.data["original_action_index"]
            dedups += 1
    assert dedups > 0
    # Each call started once in its round: the dedups replace second starts.
    for events in PARSED:
        ids = [e.data["tool_call_id"] for e in of_type(events, "tool.early_started")]
        assert len(ids) == len(set(ids))


def test_it_dedups_by_slot_or_by_fingerprint_when_siblings_are_reordered() -> None:
    matches = {
        (dedup.data["match"], dedup.data["original_action_index"] == dedup.action_index)
        for seed in range(12)
        for dedup in of_type(parsed(one("retry", seed)), "ledger.dedup")
    }
    assert matches == {("slot", True), ("fingerprint", False)}


def test_it_never_runs_the_sibling_a_reordered_retry_moved_onto_the_early_calls_slot() -> None:
    # The runtime looks up every accepted call: the slot of the early call now holds the sibling,
    # so the sibling is a dedup too and nothing runs after generation.
    reordered = 0
    for seed in range(12):
        events = parsed(one("retry", seed))
        retry = [e for e in of_type(events, "ledger.dedup") if e.attempt == 1]
        if {e.data["match"] for e in retry} == {"slot", "fingerprint"}:
            assert [e.action_index for e in retry] == [0, 1]
            assert not list(of_type(events, "tool.started"))
            reordered += 1
        else:
            # Same order: the early call is a slot dedup, the sibling runs on the ordinary path.
            assert [(e.action_index, e.data["match"]) for e in retry] == [(0, "slot")]
            assert [e.action_index for e in of_type(events, "tool.started")] == [1]
    assert 0 < reordered < 12


def test_it_gives_the_overseers_verdicts_on_the_streamed_actions() -> None:
    # One overseer per round, across its attempts, judging each observed action in stream order;
    # the first verdict of an action is the online one (a backstop rejection may follow).
    policy = RoundPolicy.of(RESOLUTION.tools)
    checked = 0
    for events in PARSED:
        overseer = Overseer(policy.traits, 2)
        online: dict[tuple[int, int | None], Event] = {}
        for event in events:
            if event.type in ("action.accepted", "action.rejected"):
                online.setdefault((event.attempt, event.action_index), event)
        for observed in of_type(events, "action.observed"):
            action = Action(
                observed.data["action"],
                observed.data["tool_id"],
                observed.data.get("params"),
                has_params="params" in observed.data,
            )
            verdict = overseer.observe(observed.data["action_index"], action)
            event = online[(observed.attempt, observed.action_index)]
            if verdict.accepted:
                assert event.type == "action.accepted"
                assert event.data["strategy"] == list(verdict.strategy)
            else:
                assert event.type == "action.rejected"
                assert (event.data["code"], event.data["extra"]) == (verdict.code, verdict.extra)
            checked += 1
        # The stream stops at a rejection: nothing of the same attempt is observed after it.
        for rejected in of_type(events, "action.rejected"):
            if online[(rejected.attempt, rejected.action_index)] is rejected:
                later = [
                    e
                    for e in of_type(events, "action.observed")
                    if e.attempt == rejected.attempt and e.ts > rejected.ts
                ]
                assert later == []
    assert checked > 60


def test_it_judges_each_action_when_it_completes_in_the_stream() -> None:
    for events in PARSED:
        observed = {(e.attempt, e.action_index): e.ts for e in of_type(events, "action.observed")}
        judged = [e for e in events if e.type in ("action.accepted", "action.rejected")]
        for verdict in judged:
            assert observed[(verdict.attempt, verdict.action_index)] < verdict.ts
            # ...and before the next action of the stream begins.
            following = observed.get((verdict.attempt, (verdict.action_index or 0) + 1))
            assert following is None or verdict.ts < following


def test_it_reports_a_backstop_rejection_after_generation() -> None:
    # A code-execution tool may not run in a multi-action bundle: the early scenario puts one
    # beside an early call (multi-action on); the online overseer accepted it.
    policy = {
        "surfaces": {
            "as_consumer": {
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "python",
                                "module": "exec_tools",
                                "alias": "exec_tools",
                                "allowed": ["execute_code_python", "launch"],
                                "tool_traits": {
                                    "execute_code_python": {"strategy": ["exploration"]},
                                    "launch": {
                                        "strategy": ["neutral"],
                                        "execution": dict(EARLY_PROFILE),
                                    },
                                },
                            }
                        ]
                    }
                }
            }
        }
    }
    resolution = resolve_agent(policy, "main")
    seen = 0
    for seed in range(20):
        events = parsed(one("early", seed, resolution))
        finished = next(of_type(events, "generation.finished")).ts
        for rejected in of_type(events, "action.rejected"):
            assert rejected.data["code"] == "multi_action_bundle_unsafe_tool"
            assert rejected.data["extra"] == {"tool_id": "exec_tools.execute_code_python"}
            assert rejected.ts > finished
            accepted = [
                e
                for e in of_type(events, "action.accepted")
                if e.action_index == rejected.action_index
            ]
            assert accepted
            assert accepted[0].ts < finished
            r = assemble(events)
            action = r.attempts[0].actions[rejected.action_index or 0]
            assert (action.verdict, action.tool_call_id) == ("rejected", None)
            seen += 1
    assert seen > 0


def test_it_runs_ordinary_calls_after_generation_and_never_rejected_ones() -> None:
    for r, events in zip(ASSEMBLED, PARSED, strict=True):
        finished = r.generation_finished_at
        for started in of_type(events, "tool.started"):
            assert finished is not None
            assert started.ts > finished
        for attempt in r.attempts:
            for action in attempt.actions:
                if action.verdict == "rejected":
                    assert action.tool_call_id is None


def test_it_times_out_a_call_past_its_timeout_s_naming_the_async_alternative() -> None:
    timeouts = [e for events in PARSED for e in of_type(events, "tool.timeout")]
    assert timeouts
    for timeout in timeouts:
        assert timeout.data["tool_id"] == "workspace_jobs.export_report"
        assert timeout.data["limit_ms"] == 2000
        assert timeout.data["elapsed_ms"] > 2000
        assert timeout.data["async_alternative"] == "workspace_jobs.launch_background_job"


def test_it_finishes_calls_of_tools_with_a_timeout_within_it() -> None:
    for events in PARSED:
        for done in of_type(events, "tool.finished"):
            if done.data["tool_id"] == "workspace_jobs.export_report":
                assert done.data["duration_ms"] < 2000


def test_it_fails_exactly_the_rounds_with_a_timeout_or_an_error() -> None:
    for r in ASSEMBLED:
        calls = [action for attempt in r.attempts for action in attempt.actions]
        broken = any(action.status in ("timeout", "error") for action in calls)
        assert (r.outcome == "failed") == broken


def test_a_failed_round_and_its_failed_call_say_why() -> None:
    failed = [r for r in ASSEMBLED if r.outcome == "failed"]
    assert failed
    codes = set()
    for r in failed:
        calls = [action for attempt in r.attempts for action in attempt.actions]
        assert r.error_code, r.key
        assert r.error_message, r.key
        for action in calls:
            if action.status == "error":
                assert action.error_code
                assert action.error_message
                assert action.tool_id in action.error_message
                codes.add(action.error_code)
        first = next(a for a in calls if a.status in ("timeout", "error"))
        if first.status == "timeout":
            assert r.error_code == "tool_timeout"
    # Not one reason for every failure: the demo shows timeouts and errors of several kinds (over
    # a few seeds: one seed's 40 rounds may fail by timeouts alone).
    reasons = {
        r.error_code
        for seed in range(1, 6)
        for r in (assemble(parsed(events)) for events in rounds(seed))
        if r.outcome == "failed"
    }
    assert len(codes | reasons) >= 2
    many = {
        event["error_code"]
        for seed in range(2, 6)
        for events in rounds(seed)
        for event in events
        if event["type"] == "tool.finished" and event["status"] == "error"
    }
    assert len(many) >= 3
    for r in ASSEMBLED:
        if r.outcome != "failed":
            assert r.error_code is None
            assert r.error_message is None


def test_it_retries_a_round_in_which_nothing_was_accepted() -> None:
    outcomes = set()
    for seed in range(10):
        r = assemble(parsed(one("unsupported", seed)))
        accepted = [a for a in r.attempts[-1].actions if a.verdict == "accepted"]
        assert (r.outcome == "retried") == (not accepted)
        outcomes.add(r.outcome)
    assert "retried" in outcomes
    assert len(outcomes) > 1


def test_it_orders_exploration_before_exploitation_on_purpose() -> None:
    r = assemble(parsed(one("conflict")))
    first, second = r.attempts[0].actions[:2]
    assert first.verdict == "accepted"
    assert (second.verdict, second.code) == (
        "rejected",
        "multi_action_bundle_strategy_incompatible",
    )


def test_it_sometimes_names_a_namespace_for_a_named_service_call() -> None:
    namespaces = {
        (e["params"] or {}).get("namespace")
        for events in ROUNDS
        for e in events
        if e["type"] == "action.observed" and str(e["tool_id"]).startswith("named_services.")
    }
    assert namespaces == {None, "task"}


SIGNATURES = {
    "plain": lambda r: r.counts["actions"] >= 1,
    "conflict": lambda r: "rejection" in r.has,
    "early": lambda r: "early" in r.has,
    "retry": lambda r: "dedup" in r.has and len(r.attempts) == 2,
    "slow": lambda r: "workspace_jobs.export_report" in r.tool_ids,
    "final": lambda r: any(a.action in ("complete", "exit") for a in r.attempts[0].actions),
    "unsupported": lambda r: any(
        a.code == "multi_action_bundle_mixed_actions" for a in r.attempts[0].actions
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_it_plays_each_scenario_with_the_agents_tools(scenario: str) -> None:
    for seed in range(5):
        assert SIGNATURES[scenario](assemble(parsed(one(scenario, seed))))


def test_it_times_out_many_slow_rounds_but_not_all() -> None:
    timed_out = sum("timeout" in assemble(parsed(one("slow", seed))).has for seed in range(20))
    assert 5 <= timed_out <= 18


def test_it_cycles_agents_and_moves_through_turns() -> None:
    simulator = Simulator(POLICY, seed=9)
    keys = []
    for n in range(12):
        agent, events = simulator.next_round(NOW + timedelta(minutes=n))
        first = events[0]
        assert first["agent"] == agent
        keys.append((agent, first["turn_id"], first["iteration"]))
    assert [agent for agent, _, _ in keys] == ["main", "helper"] * 6
    assert len(set(keys)) == 12
    assert any(iteration > 0 for _, _, iteration in keys)
    assert len({turn for _, turn, _ in keys}) > 2


def test_it_gives_other_seeds_other_turn_ids() -> None:
    assert rounds(seed=1, count=1)[0][0]["turn_id"] != rounds(seed=2, count=1)[0][0]["turn_id"]


def test_it_simulates_an_agent_the_policy_lacks_with_what_the_runtime_offers_it() -> None:
    simulator = Simulator(POLICY, seed=3, agents=["ghost"])
    rounds = [simulator.next_round(NOW)[1] for _ in range(10)]
    tools = {e["tool_id"] for events in rounds for e in events if e.get("tool_id") is not None}
    assert tools
    assert {e["agent"] for events in rounds for e in events} == {"ghost"}
    # The runtime runs an agent id the config does not name as its default agent.
    assert all(RESOLUTION.find(tool) is not None for tool in tools)


def test_it_refuses_a_policy_without_agents() -> None:
    empty: Mapping[str, Any] = {"surfaces": {"as_consumer": {"agents": {}}}}
    with pytest.raises(ValueError, match="no agent to simulate"):
        Simulator(empty, seed=1)


def test_it_refuses_a_naive_start_and_an_unknown_scenario() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        simulate_round(
            RESOLUTION,
            rng=random.Random(1),
            agent="main",
            turn_id="t",
            iteration=0,
            start=datetime(2026, 1, 1),  # noqa: DTZ001 - the naive datetime is the point
            policy_hash=None,
        )
    with pytest.raises(ValueError, match="unknown scenario 'chaos'"):
        one("chaos")
