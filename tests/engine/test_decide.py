"""The verdicts-only path (``decide``) answers exactly what the full dry-run answers, for any round
— one engine, read two ways (its four facts, and the rendered JSON)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance import round_policies
from core.vocabulary import EARLY_PROFILE
from engine.replay.draft_impact import outcomes
from engine.round.decide import Outcome, decide, outcomes_by_slot
from engine.round.dryrun import dry_run, parse_round_spec
from engine.tools.manifest import parse_manifest
from engine.tools.resolution import resolve_agent
from engine.traits.round_policy import RoundPolicy


def _policies() -> dict[str, RoundPolicy]:
    found = {}
    for name, entry in round_policies.policies().items():
        resolution = resolve_agent(entry["policy"], "main", parse_manifest(entry["manifest"]))
        found[name] = RoundPolicy.of(resolution.tools)
    return found


POLICIES = _policies()
BUILTINS = ["react.read", "react.write", "react.plan", "react.memsearch", "react.delegate"]
ODD_IDS = ["nope.tool", "exec_tools.execute_code_python", " padded ", "", "named_services.x "]


@st.composite
def actions(draw: Any, tools: list[str]) -> dict[str, Any]:
    word = draw(
        st.sampled_from(
            ["call_tool"] * 8 + ["complete", "exit", "think", " call_tool", "", "complete "]
        )
    )
    action: dict[str, Any] = {"action": word}
    named = word.strip() == "call_tool" or draw(st.booleans()) and draw(st.booleans())
    if named and draw(st.integers(0, 9)):
        action["tool_id"] = draw(st.sampled_from(tools + BUILTINS + ODD_IDS))
    if draw(st.integers(0, 3)) == 0 or "tool_id" in action and draw(st.integers(0, 4)):
        action["params"] = draw(
            st.sampled_from(
                [
                    None,
                    {},
                    {"q": "a"},
                    {"q": "b"},
                    {"q": "ü"},
                    {"namespace": "mem"},
                    {"namespace": "MEM:notes"},
                    {"namespace": "task"},
                    {"paths": ["p"]},
                    {"path": "a", "channel": "c", "content": "x", "kind": "k"},
                    {"channel": "c", "path": "a"},
                    {"contract": ["x"]},
                    ["x"],
                    "text",
                    3,
                ]
            )
        )
    for key in ("final_answer", "notes"):
        if draw(st.integers(0, 2)) == 0:
            action[key] = draw(st.sampled_from(["done", "", "  "]))
    return action


@st.composite
def rounds(draw: Any) -> tuple[str, dict[str, Any], str]:
    name = draw(st.sampled_from(sorted(POLICIES)))
    tools = sorted(POLICIES[name].traits_by_id) or ["none.configured"]
    first = draw(st.lists(actions(tools), min_size=1, max_size=5))
    attempts = [first]
    for _ in range(draw(st.integers(0, 2))):
        again = list(first)
        if draw(st.booleans()):
            again = draw(st.permutations(again))
        if draw(st.booleans()):
            again.append(draw(actions(tools)))
        attempts.append(again)
    spec: dict[str, Any] = {
        "turn_id": draw(st.sampled_from(["turn-1", " turn-2 "])),
        "iteration": draw(st.integers(0, 2)),
        "attempts": attempts,
    }
    cap = draw(st.sampled_from([None, None, 0, -1, 1, 2, 3]))
    if cap is not None:
        spec["max_actions"] = cap
    mode = draw(st.sampled_from(["on", "off", " TRUE ", "fanout", "nope"]))
    return name, spec, mode


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_it_answers_what_the_full_dry_run_answers(case: tuple[str, dict[str, Any], str]) -> None:
    name, data, mode = case
    spec, policy = parse_round_spec(data), POLICIES[name]
    full = outcomes(dry_run(spec, policy, multi_action_mode=mode))
    assert outcomes_by_slot(spec, decide(spec, policy, multi_action_mode=mode)) == full


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rounds(), min_size=2, max_size=6))
def test_a_policy_answers_each_round_as_if_it_were_its_first(
    cases: list[tuple[str, dict[str, Any], str]],
) -> None:
    # The engine keeps what it worked out per policy (each tool's facts, a plain call's step per
    # stream index): a round must get the same answer from a policy that ran other rounds
    # before as from a fresh copy of it.
    used = {name: RoundPolicy(p.traits_by_id, p.overrides_by_id) for name, p in POLICIES.items()}
    for name, data, mode in cases:
        spec = parse_round_spec(data)
        fresh = RoundPolicy(POLICIES[name].traits_by_id, POLICIES[name].overrides_by_id)
        assert decide(spec, used[name], multi_action_mode=mode) == decide(
            spec, fresh, multi_action_mode=mode
        )
        assert dry_run(spec, used[name], multi_action_mode=mode) == dry_run(
            spec, fresh, multi_action_mode=mode
        )


def _early(tool: str) -> dict[str, Any]:
    return {"tool_id": tool, "traits": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)}}


class _Tool:
    def __init__(self, tool_id: str, traits: dict[str, Any]) -> None:
        self.tool_id, self.traits = tool_id, traits
        self.namespace_overrides: dict[str, Any] = {}
        self.builtin = False


def _policy(**traits: dict[str, Any]) -> RoundPolicy:
    return RoundPolicy.of([_Tool(tool, value) for tool, value in traits.items()])


def test_it_runs_a_reordered_retry_itself_and_finds_the_early_calls_dedups() -> None:
    early = {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)}
    policy = _policy(**{"s.a": early, "s.b": {"strategy": ["exploration"]}})
    first = [
        {"action": "call_tool", "tool_id": "s.a", "params": {"q": 1, "r": 2}},
        {"action": "call_tool", "tool_id": "s.b", "params": {}},
    ]
    retry = [first[1], {"action": "call_tool", "tool_id": "s.a", "params": {"r": 2, "q": 1}}]
    spec = parse_round_spec({"turn_id": "t", "iteration": 0, "attempts": [first, retry]})

    decision = decide(spec, policy, multi_action_mode="on")

    started = Outcome("dropped", None, True, False)
    assert decision[0] == (started, Outcome("dropped", None, False, False))
    # In the retry, index 0 (s.b) finds s.a's slot taken; s.a at index 1 matches its
    # fingerprint (params equal whatever their key order).
    assert decision[1] == (
        Outcome("accepted", None, False, True),
        Outcome("accepted", None, False, True),
    )


def test_it_answers_ids_the_runtime_strips_as_the_dry_run_does() -> None:
    policy = _policy(**{"s.a": {"strategy": ["exploration"]}})
    spec = parse_round_spec(
        {"turn_id": "t", "iteration": 0, "actions": [{"action": "call_tool", "tool_id": " s.a "}]}
    )
    assert decide(spec, policy) == ((Outcome("accepted", None, False, False),),)


def test_it_compares_strategies_with_params_after_generation_and_without_while_streaming() -> None:
    # search_objects is exploration, exploitation in the mem namespace; exploration may not be
    # followed by exploitation. Streaming sees no params (both exploration: accepted); the
    # backstop sees the namespace and rejects the second. The neutral early jot still runs.
    policy = POLICIES["namespaces"]
    search = "named_services.search_objects"
    spec = parse_round_spec(
        {
            "turn_id": "t",
            "iteration": 0,
            "max_actions": 3,
            "actions": [
                {"action": "call_tool", "tool_id": search, "params": {}},
                {"action": "call_tool", "tool_id": search, "params": {"namespace": "mem"}},
                {"action": "call_tool", "tool_id": "notes.jot", "params": {"text": "x"}},
            ],
        }
    )
    assert decide(spec, policy, multi_action_mode="on") == (
        (
            Outcome("accepted", None, False, False),
            Outcome("rejected", "multi_action_bundle_strategy_incompatible", False, False),
            Outcome("accepted", None, True, False),
        ),
    )
    assert outcomes_by_slot(spec, decide(spec, policy, multi_action_mode="on")) == outcomes(
        dry_run(spec, policy, multi_action_mode="on")
    )
