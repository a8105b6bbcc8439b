"""What the simulated model streams in one round: a scenario picks the actions and the multi-action
mode the round runs with (DESIGN §2.3–2.5, §2.10).

The simulator has no model. Instead each round follows a *scenario* that aims at one behaviour the
live view must show — a rejection, an early start, a ledger dedup, a timeout — and picks real tools
of the agent for it. The policy engine then decides, exactly as in production, what happens: a
scenario only sets up the stream; it never decides a verdict.

Rounds run with multi-action ``off`` (the runtime's default: only the first action is executed)
except where siblings are the point: an early call next to a sibling, and a provider retry, run
``on`` so the sibling runs beside the early call (after the post-generation backstop).

How often each scenario comes up (:data:`SCENARIO_WEIGHTS`) is chosen for a demo, not measured
from production: every behaviour the live view must show gets enough weight that a few dozen rounds
show each kind at least once when the policy allows it (``Simulator`` deals scenarios from a
shuffled deck, so every 16 rounds hold every scenario),
while most rounds still end "ok" (about four in five with a typical policy). Behaviours that only
show in part of their rounds — a slow tool often finishes in time — get a larger weight than those
that always show.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from core.vocabulary import EXPLOITATION, EXPLORATION, NEUTRAL
from engine.round.overseer import Action
from engine.tools.resolution import AgentResolution, EffectiveTool
from engine.traits.execution_design import parse_design

#: Relative weights. ``slow`` is heavier because a slow tool often finishes in time; ``conflict``
#: is the rejection people meet most; ``retry`` always dedups when the policy has an early tool.
SCENARIO_WEIGHTS: Final[Mapping[str, int]] = {
    "plain": 3,  # 1–3 tools picked at random: what most rounds look like
    "conflict": 3,  # exploration, then exploitation: the overseer rejects the second
    "early": 2,  # an early-eligible neutral call, alone or with a sibling
    "retry": 2,  # a provider retry re-streams the round: the ledger dedups the early call
    "slow": 3,  # a tool with timeout_s, likely to exceed it
    "final": 2,  # a final answer, alone or next to a tool call
    "unsupported": 1,  # an action the runtime does not support (it stops the stream)
}
SCENARIOS: Final = tuple(SCENARIO_WEIGHTS)

#: Of the ``plain`` rounds, the share whose first call is the slowing tool
#: (:attr:`Palette.slowing`).
SLOWING_SHARE: Final = 0.6
#: Chance that a call that does not time out ends in an error.
ERROR_CHANCE: Final = 0.06
#: Chance that a named-service call names a namespace (whose override may change its strategy).
NAMESPACE_CHANCE: Final = 0.5
#: Chance to pick among the configured tools rather than all tools with the built-ins: the demo
#: is about the admin's own tools, but the built-ins show up too.
CONFIGURED_CHANCE: Final = 0.8

_QUERIES: Final = ("open invoices", "quarterly revenue", "incident 4711", "onboarding checklist")
_PATHS: Final = ("notes/plan.md", "reports/q3.csv", "src/app.py", "docs/runbook.md")
_CHARTERS: Final = ("summarize the open tickets", "draft the weekly report", "triage alerts")
_UNSUPPORTED: Final = ("think", "ask_user", "reply")
_FINALS: Final = ("complete", "exit")
#: The mode of most rounds (the runtime's default) and of rounds whose siblings must all run.
OFF: Final = "off"
ON: Final = "on"


@dataclass(frozen=True)
class Palette:
    """An agent's tools grouped by what a scenario needs."""

    tools: tuple[EffectiveTool, ...]
    namespaces: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, resolution: AgentResolution) -> Palette:
        namespaces: dict[str, tuple[str, ...]] = {}
        for tool in resolution.tools:
            names = list(tool.namespace_overrides)
            for connection in resolution.connections:
                if connection.index == tool.connection_index:
                    names += [
                        ns.name for ns in connection.namespaces if tool.callable in ns.callables
                    ]
            if names:
                namespaces[tool.tool_id] = tuple(dict.fromkeys(names))
        return cls(resolution.tools, namespaces)

    def where(self, strategy: str) -> tuple[EffectiveTool, ...]:
        """Tools whose default strategy is exactly ``{strategy}`` (early ones excluded)."""
        return tuple(t for t in self.tools if set(t.strategy) == {strategy} and not t.early)

    @property
    def early(self) -> tuple[EffectiveTool, ...]:
        return tuple(t for t in self.tools if t.early)

    @property
    def slow(self) -> tuple[EffectiveTool, ...]:
        return tuple(t for t in self.tools if timeout_s(t) is not None)

    @property
    def slowing(self) -> EffectiveTool | None:
        """The tool that slows down as a simulation goes on (tool health's async-candidate):
        the first synchronous tool, by id, that names an async alternative; else the one with
        the longest timeout."""
        return _slowing(self.tools)

    @property
    def at_limit(self) -> EffectiveTool | None:
        """The tool that keeps running into its time limit (tool health's timeout-too-tight):
        the synchronous tool with the shortest timeout, ties by id, other than the slowing one
        (none either when there is no slowing one)."""
        slowing = self.slowing
        if slowing is None:
            return None
        candidates = [t for t in _sync_with_timeout(self.tools) if t is not slowing]
        return min(candidates, key=lambda t: (timeout_s(t) or 0, t.tool_id), default=None)

    @property
    def known(self) -> tuple[EffectiveTool, ...]:
        """Tools with one concrete strategy: safe siblings that do not force a rejection."""
        return tuple(t for t in self.tools if len(t.strategy) == 1 and t.strategy[0] != "unknown")


@dataclass(frozen=True)
class Plan:
    """The actions of attempt 0, for a provider retry the order attempt 1 re-streams them, and
    the ``multi_action_mode`` the runtime runs the round with. The simulator plays a **v3**
    runtime with multi-action **on** (issue 37: so every chip shows; under v3 with the mode off
    a decision of two accepted actions would run nothing, and KDCube's default v2 has no
    overseer, early start or ledger at all)."""

    scenario: str
    actions: tuple[Action, ...]
    retry_order: tuple[int, ...] | None = None
    multi_action_mode: str = ON


def timeout_s(tool: EffectiveTool) -> float | None:
    return parse_design(tool.execution_design)[0].timeout_s


def _sync_with_timeout(tools: Sequence[EffectiveTool]) -> list[EffectiveTool]:
    found = []
    for tool in tools:
        design = parse_design(tool.execution_design)[0]
        if design.timeout_s is not None and design.effective_mode == "sync" and not tool.early:
            found.append(tool)
    return found


#: A policy needs this many timed synchronous tools before one of them is the slowing one: with
#: fewer, the slow rounds keep their tools timing out (the point of those rounds).
SLOWING_NEEDS: Final = 3


def _slowing(tools: Sequence[EffectiveTool]) -> EffectiveTool | None:
    candidates = sorted(_sync_with_timeout(tools), key=lambda t: t.tool_id)
    if len(candidates) < SLOWING_NEEDS:
        return None
    for tool in candidates:
        if parse_design(tool.execution_design)[0].async_alternative:
            return tool
    return max(candidates, key=lambda t: (timeout_s(t) or 0, t.tool_id), default=None)


def pick_scenario(rng: random.Random) -> str:
    return rng.choices(SCENARIOS, weights=[SCENARIO_WEIGHTS[s] for s in SCENARIOS])[0]


def plan_round(palette: Palette, scenario: str, rng: random.Random) -> Plan:
    """The actions the model streams for ``scenario``; a scenario the agent's tools cannot play
    (no exploitation tool for a conflict, say) falls back to a plain round."""
    explore, exploit = palette.where(EXPLORATION), palette.where(EXPLOITATION)
    if scenario == "conflict" and explore and exploit:
        actions = [
            _call(rng, palette, _pick(rng, explore)),
            _call(rng, palette, _pick(rng, exploit)),
        ]
        if rng.random() < 0.3:
            actions.append(_call(rng, palette, _pick(rng, palette.tools)))
        return Plan(scenario, tuple(actions))
    if scenario == "early" and palette.early:
        actions = [_call(rng, palette, _pick(rng, palette.early), namespace=False)]
        if palette.known and rng.random() < 0.6:
            sibling = _call(rng, palette, _pick(rng, palette.known))
            actions.insert(rng.randrange(2), sibling)
            # Fan-out: with multi-action off only the first action would run.
            return Plan(scenario, tuple(actions), multi_action_mode=ON)
        return Plan(scenario, tuple(actions))
    if scenario == "retry" and palette.early and palette.known:
        # The early call comes first so attempt 0 surely accepts and starts it.
        early = _call(rng, palette, _pick(rng, palette.early), namespace=False)
        sibling = _call(rng, palette, _pick(rng, palette.known), namespace=False)
        # Half the retries re-stream siblings in another order: the ledger then finds the early
        # call by its fingerprint instead of its slot (and the sibling now at the early call's
        # old slot is a dedup too: the runtime looks up every accepted call).
        order = (1, 0) if rng.random() < 0.5 else (0, 1)
        return Plan(scenario, (early, sibling), retry_order=order, multi_action_mode=ON)
    if scenario == "slow" and palette.slow:
        # The slowing tool is slow by its age, not by the round: slow rounds pick the others.
        slowing = palette.slowing
        timed = [tool for tool in palette.slow if tool is not slowing] or list(palette.slow)
        actions = [_call(rng, palette, _pick(rng, timed))]
        if rng.random() < 0.4:
            actions.append(_call(rng, palette, _pick(rng, palette.tools)))
        return Plan(scenario, tuple(actions))
    if scenario == "final":
        return Plan(scenario, _final_actions(rng, palette))
    if scenario == "unsupported":
        odd = Action(rng.choice(_UNSUPPORTED), None, {"text": "..."}, has_params=True)
        if rng.random() < 0.5:
            # Alone it is the round's only action: nothing is accepted and the round is retried.
            return Plan(scenario, (odd,))
        # After a call: the call runs, the odd action is rejected (anything after it would never
        # be observed, since a rejection stops the stream).
        return Plan(scenario, (_call(rng, palette, _pick(rng, palette.tools)), odd))
    count = rng.choice((1, 1, 2, 2, 3))
    picks = [_pick(rng, palette.tools) for _ in range(count)]
    slowing = palette.slowing
    if slowing is not None and rng.random() < SLOWING_SHARE:
        # The slowing tool is a busy one (its trend shows within minutes), called alone: what
        # would follow it is left to the other scenarios.
        picks = [slowing]
    return Plan("plain", tuple(_call(rng, palette, tool) for tool in picks))


def _final_actions(rng: random.Random, palette: Palette) -> tuple[Action, ...]:
    # A final answer carries its text and no tool call (the runtime rejects one with params).
    final = Action(rng.choice(_FINALS), None, final_answer="Done.")
    neutral = palette.where(NEUTRAL) + palette.early
    explore = palette.where(EXPLORATION)
    shape = rng.randrange(4)
    if shape == 1 and explore:
        # A final answer after exploration: rejected (final after non-neutral).
        return (_call(rng, palette, _pick(rng, explore)), final)
    if shape == 2 and neutral:
        # Neutral bookkeeping, then the answer: both accepted.
        return (_call(rng, palette, _pick(rng, neutral), namespace=False), final)
    if shape == 3 and explore:
        # A tool call after the final answer: rejected (non-neutral after final answer).
        return (final, _call(rng, palette, _pick(rng, explore)))
    return (final,)


def _pick(rng: random.Random, tools: Sequence[EffectiveTool]) -> EffectiveTool:
    configured = [tool for tool in tools if not tool.builtin]
    if configured and rng.random() < CONFIGURED_CHANCE:
        return rng.choice(configured)
    return rng.choice(list(tools))


def _call(
    rng: random.Random, palette: Palette, tool: EffectiveTool, *, namespace: bool = True
) -> Action:
    params = _params(rng, tool)
    namespaces = palette.namespaces.get(tool.tool_id, ())
    if namespace and namespaces and rng.random() < NAMESPACE_CHANCE:
        params["namespace"] = rng.choice(namespaces)
    return Action("call_tool", tool.tool_id, params, has_params=True)


def _params(rng: random.Random, tool: EffectiveTool) -> dict[str, Any]:
    """Parameters that look like what a model sends to a tool of that name."""
    if tool.tool_id == "react.read":
        # The runtime requires a list of paths.
        return {"paths": [rng.choice(_PATHS)]}
    if tool.tool_id == "react.write":
        # The runtime requires this key order.
        return {
            "path": rng.choice(_PATHS),
            "channel": "canvas",
            "content": f"revision {rng.randrange(1, 100)}",
            "kind": "markdown",
        }
    name = tool.callable.lower()
    if "delegate" in name:
        return {
            "charter": rng.choice(_CHARTERS),
            "agent_alias": rng.choice(("strong_agent", "fast_agent")),
        }
    if any(word in name for word in ("search", "find", "query", "rg", "list")):
        return {"query": rng.choice(_QUERIES), "limit": rng.choice((5, 10, 20))}
    if any(word in name for word in ("read", "open", "pull", "checkout", "fetch", "get")):
        return {"path": rng.choice(_PATHS)}
    if any(word in name for word in ("write", "patch", "upsert", "export", "save", "update")):
        return {"path": rng.choice(_PATHS), "content": f"revision {rng.randrange(1, 100)}"}
    if any(word in name for word in ("launch", "job", "schedule", "plan")):
        return {"job": rng.choice(_CHARTERS), "priority": rng.choice(("low", "normal"))}
    return {"input": rng.choice(_QUERIES)}
