"""The catalog text (DESIGN §2.7, §2.10 item 8): each tool's ``Scope:`` block as the runtime's
``build_tools_block(build_tool_catalog(adapters))`` renders it for the model, against Traitdeck's
``engine.catalog.catalog``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from conformance.families.config import (
    NEUTRAL_EARLY,
    PROFILE,
    S_EXPL,
    S_EXPT,
    S_NEUT,
    all_inputs,
    canonical,
    mcp,
    ns,
    one,
    policy_of,
    py,
)

NAME = "catalog"
MIN_CASES = 60

SCOPE = "   Scope:"
TOOL_MARK = "\N{WRENCH} ["


def _hand_cases() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []

    def add(
        name: str, policy: Any, agent: str = "main", manifest: Any = None, role: Any = "parent"
    ) -> None:
        cases.append(
            (name, {"policy": policy, "agent": agent, "manifest": manifest or {}, "role": role})
        )

    values: list[tuple[str, Any]] = [
        ("list", ["a", "b"]),
        ("list-empty-items", ["", None, "x", 0, False, "  ", 3]),
        ("list-empty", []),
        ("list-nested", [[1, 2], {"a": 1}]),
        ("mapping", {"k": "v", "n": 2}),
        (
            "mapping-empty-parts",
            {"": "v", "k": "", "z": None, "o": 0, "f": False, "t": True, " ": "x", "ok": "y"},
        ),
        ("mapping-empty", {}),
        ("mapping-nested", {"a": {"b": 1}, "c": [1, 2]}),
        ("string", "plain"),
        ("string-blank", "   "),
        ("string-empty", ""),
        ("none", None),
        ("zero", 0),
        ("false", False),
        ("true", True),
        ("float", 1.5),
        ("int", 7),
        ("unicode", "größe • ok"),
    ]
    for label, value in values:
        add(
            f"value-{label}",
            one([py(allowed=["a"], traits={"a": {"strategy": "exploration", "extra": value}})]),
        )
    add("strategy-only", one([py(allowed=["a"], traits={"a": S_EXPL})]))
    add(
        "strategy-mixed",
        one([py(allowed=["a"], traits={"a": {"strategy": ["neutral", "Exploration", "bogus"]}})]),
    )
    add("strategy-empty", one([py(allowed=["a"], traits={"a": {"strategy": []}})]))
    add("strategy-unknown", one([py(allowed=["a"], traits={"a": {"strategy": "unknown"}})]))
    add("no-traits", one([py(allowed=["a", "b"], traits={"b": S_NEUT})]))
    add("early-profile", one([py(allowed=["a"], traits={"a": NEUTRAL_EARLY})]))
    add(
        "execution-extra",
        one(
            [
                py(
                    allowed=["a"],
                    traits={
                        "a": {
                            "strategy": "neutral",
                            "execution": {**PROFILE, "queue": "Q", "x": ""},
                        }
                    },
                )
            ]
        ),
    )
    add(
        "execution-not-mapping",
        one([py(allowed=["a"], traits={"a": {"execution": "early", "strategy": "neutral"}})]),
    )
    add(
        "execution-first",
        one([py(allowed=["a"], traits={"a": {"execution": dict(PROFILE), "strategy": "neutral"}})]),
    )
    add(
        "extra-keys-order",
        one(
            [py(allowed=["a"], traits={"a": {"zeta": 1, "alpha": "x", "strategy": "exploitation"}})]
        ),
    )
    add("only-extra-key", one([py(allowed=["a"], traits={"a": {"owner": "team-x"}})]))
    add("only-empty-extra", one([py(allowed=["a"], traits={"a": {"owner": ""}})]))
    add(
        "manifest-and-config",
        one([py(allowed=["a"], traits={"a": {"strategy": "neutral"}})]),
        manifest={"yb.a": {"tool_traits": {"owner": "x", "strategy": "exploration"}}},
    )
    add(
        "mcp",
        one(
            [
                mcp(
                    allowed=["open", "click"],
                    traits={"*": {"strategy": "exploration"}, "click": {"k": 1}},
                )
            ]
        ),
    )
    # named services
    add(
        "ns-namespaces-line",
        one([ns({"task": {"allowed": ["object.search"]}, "mem": {"allowed": ["object.search"]}})]),
    )
    add(
        "ns-default-and-overrides",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search", "object.upsert"],
                            "tool_traits": {"search_objects": S_EXPT},
                        },
                        "mem": {
                            "allowed": ["object.search"],
                            "tool_traits": {"search_objects": S_NEUT},
                        },
                    },
                    traits={"search_objects": {"strategy": "exploration", "owner": "x"}},
                )
            ]
        ),
    )
    add(
        "ns-only-overrides",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {"search_objects": S_EXPT},
                        }
                    }
                )
            ]
        ),
    )
    add(
        "ns-override-without-strategy",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {"search_objects": {"x": 1}},
                        }
                    },
                    traits={"search_objects": S_EXPL},
                )
            ]
        ),
    )
    add(
        "ns-override-empty-strategy",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {"search_objects": {"strategy": []}},
                        }
                    }
                )
            ]
        ),
    )
    add(
        "ns-override-two-strategies",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.upsert"],
                            "tool_traits": {
                                "upsert_object": {"strategy": ["exploitation", "neutral"]}
                            },
                        }
                    },
                    traits={"upsert_object": NEUTRAL_EARLY},
                )
            ]
        ),
    )
    add(
        "ns-override-early",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.upsert"],
                            "tool_traits": {"upsert_object": NEUTRAL_EARLY},
                        }
                    }
                )
            ]
        ),
    )
    add("ns-no-traits", one([ns({"task": {"allowed": ["object.get", "provider.about"]}})]))
    add(
        "ns-other-agent",
        policy_of(
            {
                "main": {
                    "tools": [
                        ns(
                            {"task": {"allowed": ["object.search"]}},
                            traits={"search_objects": S_EXPL},
                        )
                    ]
                },
                "b": {"tools": [ns({"mem": {"allowed": ["object.upsert"]}})]},
            }
        ),
    )
    add(
        "ns-traits-without-strategy",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {"search_objects": S_EXPT},
                        }
                    },
                    traits={"search_objects": {"owner": "x"}},
                )
            ]
        ),
    )
    for role in ("parent", "child", None):
        add(f"builtins-{role}", policy_of({}), role=role)
    return cases


def all_catalog_inputs() -> list[tuple[str, dict[str, Any]]]:
    # Every config case too: the same policies, read as the model reads them.
    return _hand_cases() + [(f"config-{name}", case) for name, case in all_inputs()]


def scope_blocks(text: str) -> list[dict[str, Any]]:
    """Per tool of a rendered tools block: its id and its Scope lines (``[]`` without one)."""
    out: list[dict[str, Any]] = []
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if not line.startswith(TOOL_MARK):
            continue
        tool_id = line.split("] ", 1)[1].removesuffix(" [async]")
        scope: list[str] = []
        for later in lines[number + 1 :]:
            if later.startswith(TOOL_MARK):
                break
            if scope and later == "":
                break
            if scope or later == SCOPE:
                scope.append(later)
        out.append({"id": tool_id, "scope": scope})
    return out


def runtime_catalogs(rt: Any) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """Each catalog input (canonical) with the catalog the runtime builds for it: the agent's
    configured tools, then the react built-ins of its role. This family renders it in full, the
    compact family compactly."""
    from conformance.runtime_policy import agent_adapters

    for name, case in all_catalog_inputs():
        case = canonical(case)
        adapters = agent_adapters(
            rt, case["policy"], case["agent"], manifest=case["manifest"], role=case["role"]
        )
        catalog = rt.layout.build_tool_catalog(adapters) + rt.react_call.get_react_tools_catalog(
            subagent_role=case["role"]
        )
        yield name, case, catalog


def record(rt: Any) -> list[dict[str, Any]]:
    out = []
    for name, case, catalog in runtime_catalogs(rt):
        text = rt.layout.build_tools_block(catalog, header="X")
        out.append({"id": name, "input": case, "runtime": scope_blocks(text)})
    return out


def predict(case: dict[str, Any]) -> Any:
    from engine.catalog.catalog import scope_lines
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_consumer

    resolution = resolve_consumer(
        case["policy"], case["agent"], parse_manifest(case["manifest"]), role=case["role"]
    )
    return [{"id": tool.tool_id, "scope": scope_lines(tool)} for tool in resolution.listing]
