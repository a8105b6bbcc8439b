"""Drift (issue 13): a round as the runtime reported it against its prediction under the policy
it names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.tools.resolution import AgentResolution, resolve_consumer
from observe.domain.drift import round_drift, summary
from observe.domain.events import parse_event
from observe.domain.rounds import Assembly, assembly_merge, assembly_new
from policy.domain.yaml_io import load_policy
from simulator.runtime import Simulator

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = (ROOT / "policy" / "sample" / "sample-policy.yaml").read_text(encoding="utf-8")
LAUNCH_EXPLORES = SAMPLE.replace(
    "launch_background_job:\n                strategy: [neutral]",
    "launch_background_job:\n                strategy: [exploration]",
    1,
)
EXPORT_EXPLORES = SAMPLE.replace(
    "export_report:\n                strategy: [exploitation]",
    "export_report:\n                strategy: [exploration]",
    1,
)
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def data(text: str) -> Any:
    loaded = load_policy(text)
    assert not loaded.refused
    return loaded.data


def resolution(text: str) -> AgentResolution:
    return resolve_consumer(data(text), "main")


def simulated(count: int, seed: int = 5) -> list[tuple[tuple[str, str, int], Assembly]]:
    """``count`` rounds the simulator plays under the sample, each as its assembly."""
    simulator = Simulator(data(SAMPLE), seed=seed)
    rounds = []
    for number in range(count):
        _, events = simulator.next_round(START + timedelta(seconds=10 * number))
        parsed = [parse_event(raw) for raw in events]
        first = parsed[0].data
        key = (first["agent"], first["turn_id"], first["iteration"])
        rounds.append((key, assembly_merge(assembly_new(), parsed)))
    return rounds


ROUNDS = simulated(150)


def test_a_runtime_that_follows_its_policy_shows_no_drift() -> None:
    policy = resolution(SAMPLE)
    for key, state in ROUNDS:
        assert round_drift(key, state, policy, policy_label="version 1") == (), key


def test_rounds_run_under_another_policy_drift_and_say_how_in_words() -> None:
    """Rounds the runtime ran under the sample, checked against a policy where the early tool is
    not neutral: its early starts contradict that policy."""
    policy = resolution(LAUNCH_EXPLORES)
    drifted = [
        d for key, state in ROUNDS for d in round_drift(key, state, policy, policy_label="v2")
    ]
    assert drifted
    early = [d for d in drifted if "early" in d.what]
    assert early
    assert all(d.tool_id == "workspace_jobs.launch_background_job" for d in early)
    assert (
        "the runtime started workspace_jobs.launch_background_job early (attempt 1, #"
        in early[0].what
    )
    assert early[0].what.endswith("v2 predicts no early start")


def test_a_rejection_the_policy_does_not_predict_is_named_with_the_rule() -> None:
    """Recorded under the sample (export_report may not follow an exploration), checked against
    a policy where export_report explores: 'the runtime rejected … (rule); … predicts it is
    accepted'."""
    policy = resolution(EXPORT_EXPLORES)
    found = [
        d
        for key, state in simulated(400, seed=7)
        for d in round_drift(key, state, policy, policy_label="version 12")
    ]
    rejected = [d for d in found if d.what.startswith("the runtime rejected")]
    assert rejected
    for d in rejected:
        assert d.tool_id == "workspace_jobs.export_report"
        assert "(multi_action_bundle_strategy_incompatible); version 12 predicts it is" in d.what


def test_dedups_are_compared_only_when_the_events_can_show_them() -> None:
    policy = resolution(LAUNCH_EXPLORES)
    everything = [
        d for key, state in ROUNDS for d in round_drift(key, state, policy, policy_label="v")
    ]
    without = [
        d
        for key, state in ROUNDS
        for d in round_drift(key, state, policy, policy_label="v", dedups_reported=False)
    ]
    assert any("reused an earlier call" in d.what for d in everything)
    assert not any("earlier call" in d.what for d in without)
    assert summary(tuple(without))["drift"] is True
    assert summary(())["drift"] is False


def test_a_round_whose_events_do_not_say_if_the_code_was_complete_is_checked_both_ways() -> None:
    """The simulator streams no code channel, so the runtime it plays rejects a code-execution
    call in a bundle as unsafe; the events do not carry ``exec_code_complete``, and a prediction
    with the code complete (the round-file default) would keep the call. Predicting both, the
    round does not drift (issue 37 §5)."""
    import random

    from core.vocabulary import EARLY_PROFILE
    from engine.tools.resolution import resolve_agent
    from simulator.runtime import simulate_round

    tools = [
        {
            "kind": "python",
            "module": "exec_tools",
            "alias": "exec_tools",
            "allowed": ["execute_code_python", "launch"],
            "tool_traits": {
                "execute_code_python": {"strategy": ["neutral"]},
                "launch": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)},
            },
        }
    ]
    policy = resolve_agent(
        {"surfaces": {"as_consumer": {"agents": {"main": {"tools": tools}}}}}, "main"
    )
    checked = 0
    for seed in range(20):
        raw = simulate_round(
            policy,
            rng=random.Random(seed),
            agent="main",
            turn_id="turn-1",
            iteration=0,
            start=START,
            policy_hash=None,
            scenario="early",
        )
        events = [parse_event(event) for event in raw]
        if not any(e.data.get("code") == "multi_action_bundle_unsafe_tool" for e in events):
            continue
        key = ("main", "turn-1", 0)
        state = assembly_merge(assembly_new(), events)
        assert round_drift(key, state, policy, policy_label="v1") == ()
        checked += 1
    assert checked


def test_a_round_whose_generation_finished_says_the_code_channel_is_predicted_with_it() -> None:
    """The same simulated rounds (the runtime refused the code-execution call as unsafe), now
    with ``generation.finished`` saying ``exec_code_complete``: false agrees with the refusal,
    true predicts the call stays, so the round drifts (issue 37 §5: the events' word is used)."""
    import random

    from engine.tools.resolution import resolve_agent
    from engine.traits.traits import EARLY_PROFILE
    from simulator.runtime import simulate_round

    tools = [
        {
            "kind": "python",
            "module": "exec_tools",
            "alias": "exec_tools",
            "allowed": ["execute_code_python", "launch"],
            "tool_traits": {
                "execute_code_python": {"strategy": ["neutral"]},
                "launch": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)},
            },
        }
    ]
    policy = resolve_agent(
        {"surfaces": {"as_consumer": {"agents": {"main": {"tools": tools}}}}}, "main"
    )
    key = ("main", "turn-1", 0)
    checked = 0
    for seed in range(20):
        raw = simulate_round(
            policy,
            rng=random.Random(seed),
            agent="main",
            turn_id="turn-1",
            iteration=0,
            start=START,
            policy_hash=None,
            scenario="early",
        )
        if not any(e.get("code") == "multi_action_bundle_unsafe_tool" for e in raw):
            continue
        drift = {}
        for said in (False, True):
            events = [
                parse_event(
                    {**e, "exec_code_complete": said} if e["type"] == "generation.finished" else e
                )
                for e in raw
            ]
            state = assembly_merge(assembly_new(), events)
            drift[said] = round_drift(key, state, policy, policy_label="v1")
        assert drift[False] == ()
        assert drift[True]
        checked += 1
    assert checked
