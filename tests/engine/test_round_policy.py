from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from core.vocabulary import EARLY_PROFILE
from engine.tools.resolution import resolve_agent
from engine.traits.round_policy import RoundPolicy
from engine.traits.traits import normalize_strategy

EARLY = {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)}


@dataclass(frozen=True)
class Tool:
    tool_id: str
    traits: Mapping[str, Any]
    namespace_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    builtin: bool = False


POLICY = RoundPolicy.of(
    [
        Tool(
            "named_services.upsert_object",
            {"strategy": ["Exploitation "]},
            {"mem": EARLY, "Task:": {"strategy": ["exploration"]}},
        ),
        Tool("jobs.lookup", {"strategy": "exploration", "note": "kept"}),
        Tool("jobs.plain", {}),
        # A built-in as the resolution lists it: the runtime keeps its own react.* traits.
        Tool("react.read", {"strategy": ["exploitation"]}, builtin=True),
    ]
)
UPSERT = "named_services.upsert_object"


@pytest.mark.parametrize(
    ("tool_id", "params", "strategy"),
    [
        (UPSERT, None, ["exploitation"]),
        (UPSERT, {}, ["exploitation"]),
        (UPSERT, {"namespace": "mem"}, ["neutral"]),
        # Lower-cased, trailing ":" stripped.
        (UPSERT, {"namespace": "MEM"}, ["neutral"]),
        (UPSERT, {"namespace": "task:"}, ["exploration"]),
        # A sub-scope falls back to its base namespace.
        (UPSERT, {"namespace": "mem:notes"}, ["neutral"]),
        (UPSERT, {"namespace": " Mem:Notes "}, ["neutral"]),
        (UPSERT, {"namespace": "other"}, ["exploitation"]),
        (UPSERT, {"namespace": ""}, ["exploitation"]),
        (UPSERT, ["mem"], ["exploitation"]),
        (f"  {UPSERT} ", {"namespace": "mem"}, ["neutral"]),
        ("jobs.lookup", {"namespace": "mem"}, ["exploration"]),
        ("react.read", None, ["exploration"]),
        ("react.delegate", {}, ["neutral"]),
    ],
)
def test_it_resolves_a_calls_strategy_with_the_runtimes_namespace_rule(
    tool_id: str, params: Any, strategy: list[str]
) -> None:
    assert POLICY.traits(tool_id, params)["strategy"] == strategy


def test_it_applies_the_whole_override_so_a_namespace_can_make_a_call_early() -> None:
    assert POLICY.traits(UPSERT, {"namespace": "mem:notes"}) == EARLY
    assert "execution" not in POLICY.traits(UPSERT)


def test_it_prefers_an_override_for_the_full_sub_scope_over_its_base() -> None:
    policy = RoundPolicy.of(
        [
            Tool(
                "svc.put",
                {"strategy": ["exploitation"]},
                {"mem": {"strategy": ["exploration"]}, "mem:notes": EARLY},
            )
        ]
    )
    assert policy.traits("svc.put", {"namespace": "mem:notes"}) == EARLY
    assert policy.traits("svc.put", {"namespace": "mem:other"})["strategy"] == ["exploration"]


def test_it_lets_a_later_override_win_when_two_keys_normalize_alike() -> None:
    policy = RoundPolicy.of(
        [
            Tool(
                "svc.put",
                {"strategy": ["exploitation"]},
                {"Mem": {"strategy": ["exploration"]}, "mem:": {"strategy": ["neutral"]}},
            )
        ]
    )
    assert policy.traits("svc.put", {"namespace": "mem"})["strategy"] == ["neutral"]


def test_it_ignores_an_empty_override() -> None:
    policy = RoundPolicy.of([Tool("svc.put", {"strategy": ["exploitation"]}, {"mem": {}})])
    assert policy.traits("svc.put", {"namespace": "mem"})["strategy"] == ["exploitation"]


def test_it_keeps_other_trait_keys_and_normalizes_the_strategy() -> None:
    assert POLICY.traits("jobs.lookup") == {"strategy": ["exploration"], "note": "kept"}


@pytest.mark.parametrize("tool_id", ["jobs.plain", "nope.tool", "", "   "])
def test_it_gives_a_tool_without_traits_an_empty_mapping(tool_id: str) -> None:
    assert POLICY.traits(tool_id) == {}


@pytest.mark.parametrize(
    ("tool_id", "known"),
    [
        (UPSERT, True),
        ("jobs.plain", True),
        # The react.* built-ins of either agent role.
        ("react.delegate", True),
        ("react.contribute", True),
        ("react.read", True),
        ("nope.tool", False),
        ("exec_tools.execute_code_python", False),
    ],
)
def test_it_knows_configured_tools_and_the_builtins(tool_id: str, known: bool) -> None:
    assert POLICY.known(tool_id) is known


def test_it_builds_from_an_agent_resolution() -> None:
    data = {
        "surfaces": {
            "as_consumer": {
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "named_service",
                                "alias": "named_services",
                                "namespaces": {
                                    "mem": {
                                        "allowed": ["object.upsert"],
                                        "tool_traits": {"upsert_object": EARLY},
                                    }
                                },
                                "tool_traits": {"upsert_object": {"strategy": ["exploitation"]}},
                            }
                        ]
                    }
                }
            }
        }
    }
    policy = RoundPolicy.of(resolve_agent(data, "main").tools)
    assert policy.known(UPSERT)
    assert policy.traits(UPSERT)["strategy"] == ["exploitation"]
    assert policy.traits(UPSERT, {"namespace": "mem:notes"})["strategy"] == ["neutral"]


@pytest.mark.parametrize(
    ("namespace", "strategy"),
    [
        ("mem", ["neutral"]),
        ("MEM:", ["neutral"]),
        ("mem:notes", ["neutral"]),
        ("task", ["exploration"]),
    ],
)
def test_the_effective_view_uses_the_runtimes_namespace_lookup(
    namespace: str, strategy: list[str]
) -> None:
    data = {
        "surfaces": {
            "as_consumer": {
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "named_service",
                                "namespaces": {
                                    "mem": {
                                        "allowed": ["object.search"],
                                        "tool_traits": {
                                            "search_objects": {"strategy": ["neutral"]}
                                        },
                                    },
                                    "task": {"allowed": ["object.search"]},
                                },
                                "tool_traits": {"search_objects": {"strategy": ["exploration"]}},
                            }
                        ]
                    }
                }
            }
        }
    }
    tool = resolve_agent(data, "main").find("named_services.search_objects")
    assert tool is not None
    traits = tool.traits_for({"namespace": namespace})
    assert list(normalize_strategy(traits.get("strategy"))) == strategy
