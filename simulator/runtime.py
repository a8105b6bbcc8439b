"""A deterministic runtime simulator: realistic round events without a model (DESIGN §2.3–2.5,
§2.10, §4).

The demo and the tests need rounds that look like the runtime's. A scenario (see
:mod:`simulator.scenarios`) chooses what the "model" streams and the multi-action mode the
round runs with; everything after that is the real policy engine: one
:func:`~engine.round.dryrun.dry_run` per round (the online overseer, early starts and the ledger
across attempts, the post-generation backstop, execution) decides every verdict, early start and
dedup, and the simulator only turns its answer into timed protocol events. All randomness comes
from the ``random.Random`` passed in, event ids included, so a seed replays the same rounds.
"""

from __future__ import annotations

import math
import random
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final

from core.timewindow import format_ts
from core.vocabulary import (
    ACTION_ACCEPTED,
    ACTION_OBSERVED,
    ACTION_REJECTED,
    GENERATION_FINISHED,
    LEDGER_DEDUP,
    ROUND_FINISHED,
    ROUND_STARTED,
    TOOL_EARLY_STARTED,
    TOOL_FINISHED,
    TOOL_STARTED,
    TOOL_TIMEOUT,
)
from engine.round.dryrun import RoundSpec, dry_run
from engine.round.overseer import Action, strategy_of
from engine.tools.agent_run import agent_run
from engine.tools.manifest import Manifest
from engine.tools.resolution import (
    AgentResolution,
    agent_names,
)
from engine.traits.execution_design import parse_design
from engine.traits.round_policy import RoundPolicy
from simulator.scenarios import (
    ERROR_CHANCE,
    SCENARIO_WEIGHTS,
    SCENARIOS,
    Palette,
    Plan,
    pick_scenario,
    plan_round,
)

#: The runtime's cap, declared by every simulated round.
MAX_ACTIONS: Final = 2
#: The errors a simulated call fails with (code, message; ``{tool}`` is the tool's id), the kinds
#: a KDCube tool reports: picked by the call id's hash, so a seed replays the same ones and the
#: random stream is not drawn from (the rounds of a seed stay as they were).
TOOL_ERRORS: Final = (
    ("upstream_unavailable", "HTTP 503 from {tool}'s backend: Service Unavailable"),
    ("rate_limited", "HTTP 429 Too Many Requests from {tool}: retry after 20 s"),
    ("invalid_params", "{tool}: params.query is required and was missing"),
    ("permission_denied", "{tool}: the workspace token lacks the jobs:write scope"),
    ("malformed_tool_result", "{tool} returned no JSON: Expecting value: line 1 column 1 (char 0)"),
)
#: A turn continues with another decision (the next iteration) this often, up to this many.
NEXT_ITERATION_CHANCE: Final = 0.4
MAX_ITERATIONS: Final = 4


def simulate_round(
    resolution: AgentResolution,
    *,
    rng: random.Random,
    agent: str,
    turn_id: str,
    iteration: int,
    start: datetime,
    policy_hash: str | None,
    scenario: str | None = None,
    age_s: float = 0.0,
) -> list[dict[str, Any]]:
    """The JSON events of one realistic round of ``agent``, starting at ``start`` (aware).

    ``scenario`` (one of :data:`~simulator.scenarios.SCENARIOS`) forces what the model
    streams; by default it is drawn from ``rng`` with the weights of
    :data:`~simulator.scenarios.SCENARIO_WEIGHTS`. Events come back in time order.
    """
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValueError("start must be a timezone-aware datetime")
    if scenario is not None and scenario not in SCENARIO_WEIGHTS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    palette = Palette.of(resolution)
    plan = plan_round(palette, scenario or pick_scenario(rng), rng)
    slowing, at_limit = palette.slowing, palette.at_limit
    latency = Latency(
        slowing=slowing.tool_id if slowing is not None else None,
        at_limit=at_limit.tool_id if at_limit is not None else None,
        age_s=age_s,
    )
    return _Round(resolution, rng, agent, turn_id, iteration, start, plan, latency).run(policy_hash)


#: Spread of a call's duration around its tool's median (a log-normal's sigma), and the chance
#: of a tail call several times slower (a cold cache, a retry inside the tool): real tool
#: latencies are heavy-tailed, not uniform.
SIGMA: Final = 0.6
TAIL_CHANCE: Final = 0.05
#: A tool's median as a share of its timeout; ``slow`` rounds run this many times slower.
MEDIAN_SHARE: Final = 0.12
SLOW_FACTOR: Final = 10.0
#: The tool that keeps timing out runs at this share of its limit (about 40 % time out).
AT_LIMIT_SHARE: Final = 0.85
#: The slowing tool: its latency grows by this factor per minute of simulation, up to the cap.
SLOWING_PER_MINUTE: Final = 3.0
SLOWING_CAP: Final = 5.0


@dataclass(frozen=True)
class Latency:
    """How long calls take: per tool a median (from its timeout, or from its id when it has
    none), spread log-normally with a heavy tail; one tool slows down as the simulation ages,
    one runs close to its limit."""

    slowing: str | None = None
    at_limit: str | None = None
    age_s: float = 0.0

    def median_ms(self, tool_id: str, limit_ms: float | None, scenario: str) -> float:
        if limit_ms is None:
            # 40 ms to ~1 s, fixed per tool (a stable hash of its id, not Python's salted one).
            return 40.0 + zlib.crc32(tool_id.encode("utf-8")) % 960
        if tool_id == self.at_limit:
            return AT_LIMIT_SHARE * limit_ms
        median = MEDIAN_SHARE * limit_ms
        if tool_id == self.slowing:
            # Slow because it is slowing down, whatever the round's scenario.
            return median * min(SLOWING_CAP, 1.0 + SLOWING_PER_MINUTE * self.age_s / 60)
        if scenario == "slow":
            median *= SLOW_FACTOR
        return median

    def draw_ms(self, rng: random.Random, median: float) -> int:
        duration = median * math.exp(rng.gauss(0.0, SIGMA))
        if rng.random() < TAIL_CHANCE:
            duration *= rng.uniform(4.0, 20.0)
        return max(1, round(duration))


@dataclass
class _Round:
    """The state of one simulated round while its events are written."""

    resolution: AgentResolution
    rng: random.Random
    agent: str
    turn_id: str
    iteration: int
    start: datetime
    plan: Plan
    latency: Latency = field(default_factory=Latency)
    events: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    failed: bool = False
    #: Why the round failed: the first failed call's error (``error_code``, ``error_message``).
    failure: dict[str, str] = field(default_factory=dict)

    def run(self, policy_hash: str | None) -> list[dict[str, Any]]:
        policy = RoundPolicy.of(self.resolution.tools)
        attempts: list[tuple[Action, ...]] = [self.plan.actions]
        if self.plan.retry_order is not None:
            attempts.append(tuple(_reworded(self.plan.actions[i]) for i in self.plan.retry_order))
        # The simulated model streams no code channel: a code-execution call in a bundle is
        # unsafe, as the runtime says when its exec streamer holds no code (issue 37 §5).
        spec = RoundSpec(
            self.turn_id,
            self.iteration,
            MAX_ACTIONS,
            tuple(attempts),
            self.plan.multi_action_mode,
            exec_code_complete=False,
        )
        result = dry_run(spec, policy, multi_action_mode=self.plan.multi_action_mode)
        self.emit(
            0,
            0,
            ROUND_STARTED,
            max_actions=MAX_ACTIONS,
            policy_hash=policy_hash,
            multi_action_mode=result["multi_action_mode"],
        )
        now = 0
        rows: Sequence[Mapping[str, Any]] = ()
        for number, (actions, attempt) in enumerate(zip(attempts, result["attempts"], strict=True)):
            rows = attempt["actions"]
            now = self.stream(number, actions, rows, policy, now + self.ms(200, 900))
            if number < len(attempts) - 1:
                # The provider dropped the stream: no generation.finished; the runtime backs off
                # and re-streams the same round (same turn and iteration) as the next attempt.
                now += self.ms(400, 1500)
                continue
            now += self.ms(20, 200)
            self.emit(now, number, GENERATION_FINISHED)
            now = self.after_generation(now, number, actions, rows)
        end = max(moment for moment, _, _ in self.events) + self.ms(10, 120)
        accepted_any = any(row["verdict"] == "accepted" for row in rows)
        outcome = "failed" if self.failed else ("ok" if accepted_any else "retried")
        self.emit(end, 0, ROUND_FINISHED, outcome=outcome, **(self.failure if self.failed else {}))
        # Stable sort: events at the same millisecond keep the order they were caused in.
        return [event for _, _, event in sorted(self.events, key=lambda item: item[:2])]

    def stream(
        self,
        attempt: int,
        actions: Sequence[Action],
        rows: Sequence[Mapping[str, Any]],
        policy: RoundPolicy,
        now: int,
    ) -> int:
        """Stream one attempt: each action the overseer observed is reported when it begins and
        judged when it is complete (the stream ends at the first rejection); an early start or a
        ledger dedup follows its verdict."""
        for action, row in zip(actions, rows, strict=True):
            online = row["online"]
            if online["verdict"] == "not_observed":
                continue
            index = row["index"]
            tool_id = _tool_id(action)
            observed: dict[str, Any] = {
                "action_index": index,
                "action": action.action,
                "tool_id": tool_id,
            }
            if action.has_params:
                observed["params"] = action.params
            self.emit(now, attempt, ACTION_OBSERVED, **observed)
            now += self.ms(300, 2000)
            if online["verdict"] == "accepted":
                # The strategy the overseer judged: the tool's default, before params arrive.
                strategy = list(strategy_of(action, policy.traits))
                self.emit(
                    now,
                    attempt,
                    ACTION_ACCEPTED,
                    action_index=index,
                    tool_id=tool_id,
                    strategy=strategy,
                )
            else:
                self.emit(
                    now,
                    attempt,
                    ACTION_REJECTED,
                    action_index=index,
                    tool_id=tool_id,
                    code=online["code"],
                    extra=dict(online["extra"]) or None,
                )
            if row["ledger"] == "started":
                self.early(now + self.ms(1, 5), attempt, row)
            elif row["ledger"] == "dedup":
                self.dedup(now + self.ms(1, 5), attempt, row)
            now += self.ms(20, 300)
        return now

    def after_generation(
        self, now: int, attempt: int, actions: Sequence[Action], rows: Sequence[Mapping[str, Any]]
    ) -> int:
        """The decision after generation: post-generation rejections (the backstop, or the check
        of a single decision), then the accepted calls that did not start early and were not
        deduplicated run on the ordinary path, one by one."""
        for row in rows:
            if row["verdict"] == "rejected" and row["online"]["verdict"] != "rejected":
                now += self.ms(1, 20)
                self.emit(
                    now,
                    attempt,
                    ACTION_REJECTED,
                    action_index=row["index"],
                    tool_id=_tool_id(actions[row["index"]]),
                    code=row["code"],
                    extra=row["extra"],
                )
        for action, row in zip(actions, rows, strict=True):
            if (
                row["verdict"] == "accepted"
                and action.name == "call_tool"
                and row["ledger"] is None
            ):
                now = self.call(now + self.ms(5, 40), attempt, row["index"], action.tool)
        return now

    def early(self, now: int, attempt: int, row: Mapping[str, Any]) -> None:
        """An early call starts as its action completes; it runs detached, in parallel with
        generation, so its end does not move the round's clock."""
        tool_call_id = row["tool_call_id"]
        self.emit(
            now,
            attempt,
            TOOL_EARLY_STARTED,
            action_index=row["index"],
            tool_id=row["tool_id"],
            tool_call_id=tool_call_id,
            fingerprint=row["fingerprint"],
        )
        self.finish(now, attempt, row["index"], row["tool_id"], tool_call_id)

    def dedup(self, now: int, attempt: int, row: Mapping[str, Any]) -> None:
        """The ledger already holds this call's slot or fingerprint: it is not run again."""
        self.emit(
            now,
            attempt,
            LEDGER_DEDUP,
            action_index=row["index"],
            tool_id=row["tool_id"],
            # The original call's id: the dedup reuses it instead of running again.
            tool_call_id=row["tool_call_id"],
            original_action_index=row["original_action_index"],
            match=row["match"],
            fingerprint=row["fingerprint"],
        )

    def call(self, now: int, attempt: int, index: int, tool_id: str) -> int:
        """Run an ordinary call after generation; returns when it ended (calls run one by
        one)."""
        tool_call_id = "call_" + self.hex(12)
        self.emit(
            now,
            attempt,
            TOOL_STARTED,
            action_index=index,
            tool_id=tool_id,
            tool_call_id=tool_call_id,
        )
        end, _ = self.finish(now, attempt, index, tool_id, tool_call_id)
        return end

    def finish(
        self, started: int, attempt: int, index: int, tool_id: str, tool_call_id: str
    ) -> tuple[int, str]:
        """Write how a started call ends; returns the end and ``ok``, ``error`` or ``timeout``."""
        tool = self.resolution.find(tool_id)
        design = parse_design(tool.execution_design if tool is not None else None)[0]
        base: dict[str, Any] = {
            "action_index": index,
            "tool_id": tool_id,
            "tool_call_id": tool_call_id,
        }
        limit_ms = round(design.timeout_s * 1000) if design.timeout_s is not None else None
        median = self.latency.median_ms(tool_id, limit_ms, self.plan.scenario)
        duration = self.latency.draw_ms(self.rng, median)
        if limit_ms is not None and duration > limit_ms:
            # The runtime notices the deadline a little late.
            elapsed = limit_ms + self.ms(1, 60)
            self.failed = True
            self.failure = self.failure or {
                "error_code": "tool_timeout",
                "error_message": f"{tool_id} ran past its limit of {limit_ms / 1000:g} s",
            }
            self.emit(
                started + elapsed,
                attempt,
                TOOL_TIMEOUT,
                **base,
                limit_ms=limit_ms,
                elapsed_ms=elapsed,
                async_alternative=design.async_alternative,
            )
            return started + elapsed, "timeout"
        status = "error" if self.rng.random() < ERROR_CHANCE else "ok"
        error: dict[str, str] = {}
        if status == "error":
            code, message = TOOL_ERRORS[zlib.crc32(tool_call_id.encode()) % len(TOOL_ERRORS)]
            error = {"error_code": code, "error_message": message.format(tool=tool_id)}
            self.failed = True
            self.failure = self.failure or error
        self.emit(
            started + duration,
            attempt,
            TOOL_FINISHED,
            **base,
            status=status,
            duration_ms=duration,
            **error,
        )
        return started + duration, status

    def emit(self, at_ms: int, attempt: int, event_type: str, **fields: Any) -> None:
        event: dict[str, Any] = {
            "event_id": str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
            "ts": format_ts(self.start + timedelta(milliseconds=at_ms)),
            "agent": self.agent,
            "turn_id": self.turn_id,
            "iteration": self.iteration,
            "type": event_type,
            "attempt": attempt,
            **fields,
        }
        self.events.append((at_ms, len(self.events), event))

    def ms(self, low: int, high: int) -> int:
        return self.rng.randint(low, max(low, high))

    def hex(self, digits: int) -> str:
        return f"{self.rng.getrandbits(4 * digits):0{digits}x}"


def _tool_id(action: Action) -> str | None:
    # Final answers and unsupported actions name no tool, even if the model sent one.
    return action.tool_id if action.action == "call_tool" else None


def _reworded(action: Action) -> Action:
    """The same call as a retry re-streams it: same params, keys in another order (which the
    fingerprint must not notice). react.write keeps its order: the runtime checks it."""
    if isinstance(action.params, Mapping) and action.tool != "react.write":
        return replace(action, params=dict(reversed(list(action.params.items()))))
    return action


@dataclass
class _Agent:
    name: str
    resolution: AgentResolution
    turn: int = 0
    iteration: int = 0


class Simulator:
    """Rounds for the agents of a policy, one at a time, deterministic for a seed.

    Agents take turns in order. Each agent works through its own turns: after a round, the turn
    goes on with the next iteration when nothing was accepted (the runtime retries the decision)
    or, sometimes, as the next decision of the task; otherwise a new turn starts. An agent named
    in ``agents`` that the policy does not have is run as the runtime would run it (as the
    policy's default agent, or with only the built-in tools) — its rounds show up as "agent not in
    policy".
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        seed: int,
        agents: Sequence[str] | None = None,
        manifest: Manifest | None = None,
        policy_hashes: Mapping[str, str] | None = None,
    ) -> None:
        names = list(agents) if agents is not None else agent_names(data)
        if not names:
            raise ValueError(
                "there is no agent to simulate: the policy has none and none were named"
            )
        self._rng = random.Random(seed)
        self._agents = [_Agent(name, _resolve(data, name, manifest)) for name in names]
        self._policy_hashes = dict(policy_hashes or {})
        # Part of every turn id, so runs with different seeds never add to each other's rounds.
        self._prefix = f"{self._rng.getrandbits(24):06x}"
        self._deck: list[str] = []
        self._count = 0
        #: When the first round started: the slowing tool slows with the time since.
        self._origin: datetime | None = None

    def policy_hash(self, agent: str) -> str | None:
        """The ``policy_hash`` this simulator reports for ``agent``."""
        return self._policy_hashes.get(agent)

    def next_round(self, now: datetime) -> tuple[str, list[dict[str, Any]]]:
        """The next round (agent name and its JSON events), starting at ``now``."""
        state = self._agents[self._count % len(self._agents)]
        self._count += 1
        if self._origin is None:
            self._origin = now
        events = simulate_round(
            state.resolution,
            rng=self._rng,
            agent=state.name,
            turn_id=f"turn-{self._prefix}-{state.turn:04d}",
            iteration=state.iteration,
            start=now,
            policy_hash=self._policy_hashes.get(state.name),
            scenario=self._deal(),
            age_s=max(0.0, (now - self._origin).total_seconds()),
        )
        retried = events[-1].get("outcome") == "retried"
        goes_on = self._rng.random() < NEXT_ITERATION_CHANCE
        if retried or (goes_on and state.iteration + 1 < MAX_ITERATIONS):
            state.iteration += 1
        else:
            state.turn += 1
            state.iteration = 0
        return state.name, events

    def _deal(self) -> str:
        # Scenarios come from a shuffled deck holding each one as often as its weight: every
        # kind shows up within one deck (a few dozen rounds show them all), in a random order.
        if not self._deck:
            self._deck = [name for name in SCENARIOS for _ in range(SCENARIO_WEIGHTS[name])]
            self._rng.shuffle(self._deck)
        return self._deck.pop()


def _resolve(data: Mapping[str, Any], agent: str, manifest: Manifest | None) -> AgentResolution:
    # As the runtime runs it: an agent the policy does not name falls back (agent_run).
    return agent_run(data, agent, manifest).resolution
