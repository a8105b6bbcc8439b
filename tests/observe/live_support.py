"""Shared by the live view and consumer tests: realistic rounds, hand-made rounds, ingest."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from django.utils import timezone

from core.timewindow import format_ts
from observe.domain.events import parse_event
from observe.domain.rounds import AssembledRound, assemble
from observe.services import IngestResult, events_ingest
from policy.domain.yaml_io import load_policy
from simulator.runtime import Simulator

SAMPLE = Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
FINGERPRINT = "40b78e51de2d48e9f19370949ed7eafe6594198e5a75bc7896e0cd02e0a4681f"
#: Seed 7 shows every kind (rejection, early start, dedup, timeout) within its first 16 rounds.
SEED = 7


@cache
def _sample_text() -> str:
    return SAMPLE.read_text()


def sample_policy() -> dict[str, Any]:
    loaded = load_policy(_sample_text())
    assert loaded.data is not None
    return loaded.data


def simulated(
    count: int,
    *,
    start: datetime | None = None,
    agents: list[str] | None = None,
    gap_s: float = 10,
    seed: int = SEED,
) -> Iterator[list[dict[str, Any]]]:
    """``count`` realistic rounds of the sample policy (JSON events per round), the first at
    ``start`` (default: ten minutes ago)."""
    begin = start or timezone.now() - timedelta(minutes=10)
    simulator = Simulator(sample_policy(), seed=seed, agents=agents)
    for number in range(count):
        yield simulator.next_round(begin + timedelta(seconds=gap_s * number))[1]


def ingest(events: list[dict[str, Any]]) -> IngestResult:
    result = events_ingest(events, known_agents=frozenset({"main"}))
    assert not result.rejected, result.rejected
    return result


def ingest_simulated(count: int, **kwargs: Any) -> None:
    for events in simulated(count, **kwargs):
        ingest(events)


class HandRound:
    """The events of one hand-made round: each call adds an event 100 ms after the last."""

    def __init__(
        self,
        *,
        agent: str = "main",
        turn_id: str = "turn-hand",
        iteration: int = 0,
        start: datetime | None = None,
    ) -> None:
        self.agent = agent
        self.turn_id = turn_id
        self.iteration = iteration
        self.now = start or timezone.now() - timedelta(minutes=5)
        self.events: list[dict[str, Any]] = []

    def add(self, type_: str, *, after_ms: int = 100, **fields: Any) -> HandRound:
        self.now += timedelta(milliseconds=after_ms)
        self.events.append(
            {
                "event_id": str(uuid.uuid4()),
                "ts": format_ts(self.now),
                "agent": self.agent,
                "turn_id": self.turn_id,
                "iteration": self.iteration,
                "type": type_,
                **fields,
            }
        )
        return self

    def started(self, policy_hash: str | None = None) -> HandRound:
        return self.add("round.started", after_ms=0, max_actions=2, policy_hash=policy_hash)

    def call(
        self, index: int, tool_id: str, params: Any = None, strategy: str = "exploration"
    ) -> HandRound:
        self.add(
            "action.observed",
            action_index=index,
            action="call_tool",
            tool_id=tool_id,
            params=params or {},
        )
        return self.add("action.accepted", action_index=index, tool_id=tool_id, strategy=[strategy])

    def timeout(self, index: int, tool_id: str, alternative: str | None) -> HandRound:
        self.add("tool.started", action_index=index, tool_id=tool_id, tool_call_id=f"call_{index}")
        return self.add(
            "tool.timeout",
            after_ms=2000,
            action_index=index,
            tool_id=tool_id,
            tool_call_id=f"call_{index}",
            limit_ms=2000,
            elapsed_ms=2012,
            async_alternative=alternative,
        )

    def generation(self) -> HandRound:
        return self.add("generation.finished")

    def finished(self, outcome: str = "ok") -> HandRound:
        return self.add("round.finished", outcome=outcome)


# --- rounds without a database (the pure helpers of observe.live and observe.timeline) ---

START = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)


def at(ms: int) -> datetime:
    return START + timedelta(milliseconds=ms)


def assembled(*events: tuple[int, str, dict[str, Any]]) -> AssembledRound:
    """A round from (ms after START, type, fields) triples, assembled without a database."""
    return assemble(
        parse_event(
            {
                "event_id": f"00000000-0000-4000-8000-{number:012d}",
                "ts": at(ms).isoformat(),
                "agent": "main",
                "turn_id": "t",
                "iteration": 0,
                "type": type_,
                **fields,
            }
        )
        for number, (ms, type_, fields) in enumerate(events)
    )


CALL = {"action_index": 0, "tool_id": "react.delegate", "tool_call_id": "tc_5ca55cec48db"}
#: Early call at 1.0 s, generation finished at 2.2 s, the call ran until 3.0 s; action 1 rejected.
EARLY_ROUND = (
    (0, "round.started", {"max_actions": 2}),
    (
        500,
        "action.observed",
        {"action_index": 0, "action": "call_tool", "tool_id": "react.delegate", "params": {}},
    ),
    (
        1000,
        "action.accepted",
        {"action_index": 0, "tool_id": "react.delegate", "strategy": ["neutral"]},
    ),
    (1000, "tool.early_started", {**CALL, "fingerprint": FINGERPRINT}),
    (
        1500,
        "action.rejected",
        {"action_index": 1, "tool_id": "x", "code": "multi_action_bundle_mixed_actions"},
    ),
    (2200, "generation.finished", {}),
    (3000, "tool.finished", {**CALL, "status": "ok", "duration_ms": 2000}),
    (4000, "round.finished", {"outcome": "ok"}),
)
