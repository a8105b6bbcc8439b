"""Config loading (DESIGN §2.6, §2.10 item 9): which model-facing tools one agent gets, with which
default traits and namespace overrides — the runtime's config loader and tool subsystem
(``conformance.runtime_policy.agent_adapters``) and its react built-ins by role, against
Traitdeck's ``engine.tools.resolution``.

Over 500 lines on purpose: one family per module, as every family is — its case generator, the
recorder's side and the comparison, so a recorded case and the code that made it are read
together."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

NAME = "config"
MIN_CASES = 150

#: The complete early-execution profile (DESIGN §2.1).
PROFILE = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}
NEUTRAL_EARLY = {"strategy": ["neutral"], "execution": dict(PROFILE)}


def policy_of(agents: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"surfaces": {"as_consumer": {"agents": dict(agents)}}, **extra}


def one(tools: list[Any], agent: str = "main", **extra: Any) -> dict[str, Any]:
    return policy_of({agent: {"tools": tools}}, **extra)


def py(
    alias: str | None = "yb", allowed: Any = None, traits: Any = None, **kw: Any
) -> dict[str, Any]:
    conn: dict[str, Any] = {"kind": "python", "module": "pkg.tools"}
    if alias is not None:
        conn["alias"] = alias
    if allowed is not None:
        conn["allowed"] = allowed
    if traits is not None:
        conn["tool_traits"] = traits
    conn.update(kw)
    return conn


def mcp(
    sid: str | None = "web", allowed: Any = None, traits: Any = None, **kw: Any
) -> dict[str, Any]:
    conn: dict[str, Any] = {"kind": "mcp"}
    if sid is not None:
        conn["server_id"] = sid
    if allowed is not None:
        conn["allowed"] = allowed
    if traits is not None:
        conn["tool_traits"] = traits
    conn.update(kw)
    return conn


def ns(namespaces: Any, traits: Any = None, **kw: Any) -> dict[str, Any]:
    conn: dict[str, Any] = {"kind": "named_service", "namespaces": namespaces}
    if traits is not None:
        conn["tool_traits"] = traits
    conn.update(kw)
    return conn


S_EXPL = {"strategy": ["exploration"]}
S_EXPT = {"strategy": ["exploitation"]}
S_NEUT = {"strategy": ["neutral"]}


def _hand_cases() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []

    def add(
        name: str, policy: Any, agent: str = "main", manifest: Any = None, role: Any = "parent"
    ) -> None:
        cases.append(
            (name, {"policy": policy, "agent": agent, "manifest": manifest or {}, "role": role})
        )

    # kinds
    add("kind-python", one([py(allowed=["a", "b"], traits={"a": S_EXPL})]))
    add("kind-python-capital", one([py(allowed=["a"], traits={"a": S_EXPL}, kind="Python")]))
    add("kind-mcp-padded", one([mcp(allowed=["open"], traits={"open": S_EXPL}, kind=" MCP ")]))
    add("kind-ns-upper", one([ns({"task": {"allowed": ["object.search"]}}, kind="NAMED_SERVICE")]))
    add(
        "kind-missing",
        one([{"alias": "yb", "module": "m", "allowed": ["a"], "tool_traits": {"a": S_EXPL}}]),
    )
    add("kind-empty", one([py(allowed=["a"], kind="")]))
    add("kind-null", one([py(allowed=["a"], kind=None)]))
    add("kind-unknown", one([py(allowed=["a"], kind="rest"), py(alias="zz", allowed=["b"])]))
    add("kind-number", one([py(allowed=["a"], kind=5)]))
    # aliases
    add("alias-name", one([py(alias=None, allowed=["a"], name="nm")]))
    add("alias-wins-over-name", one([py(alias="al", allowed=["a"], name="nm")]))
    add("alias-missing-python", one([py(alias=None, allowed=["a"]), py(alias="zz", allowed=["b"])]))
    add("alias-blank-python", one([py(alias="  ", allowed=["a"], name="nm")]))
    add("alias-padded", one([py(alias=" yb ", allowed=["a"], traits={"a": S_EXPL})]))
    add("alias-number", one([py(alias=7, allowed=["a"], traits={"a": S_EXPL})]))
    add("id-key-ignored", one([py(alias=None, allowed=["a"], id="ident")]))
    add("python-no-module", one([{"kind": "python", "alias": "yb", "allowed": ["a"]}]))
    add("python-ref", one([{"kind": "python", "alias": "yb", "ref": "tools.py", "allowed": ["a"]}]))
    add(
        "python-empty-module",
        one([{"kind": "python", "alias": "yb", "module": "", "ref": "r.py", "allowed": ["a"]}]),
    )
    add("mcp-default-alias-server-id", one([mcp(allowed=["open"], traits={"open": S_EXPL})]))
    add("mcp-default-alias-server", one([mcp(None, allowed=["open"], server="srv")]))
    add(
        "mcp-default-alias-name",
        one([mcp(None, allowed=["open"], name="nm", traits={"open": S_EXPL})]),
    )
    add("mcp-server-id-over-server", one([mcp("sid", allowed=["open"], server="srv")]))
    add("mcp-no-server", one([mcp(None, allowed=["open"], alias="x")]))
    add("mcp-alias-and-name", one([mcp("sid", allowed=["open"], alias="al", name="nm")]))
    add("mcp-tools-key", one([mcp(tools=["open", "click"], traits={"click": S_EXPT})]))
    add("mcp-allowed-empty-tools", one([mcp(allowed=[], tools=["open"])]))
    add("mcp-allowed-string", one([mcp(allowed="open", traits={"open": S_EXPL})]))
    add(
        "ns-default-alias",
        one(
            [
                ns(
                    {"task": {"allowed": ["object.search", "object.upsert"]}},
                    traits={"search_objects": S_EXPL, "upsert_object": S_EXPT},
                )
            ]
        ),
    )
    add(
        "ns-alias",
        one(
            [ns({"task": {"allowed": ["object.get"]}}, alias="svc", traits={"get_object": S_EXPL})]
        ),
    )
    add("ns-name", one([ns({"task": {"allowed": ["object.get"]}}, name="svcn")]))
    # python allowed
    add(
        "python-allowed-absent-manifest",
        one([py()]),
        manifest={"yb.a": {"tool_traits": S_EXPL}, "yb.b": {}},
    )
    add(
        "python-allowed-star",
        one([py(allowed=["*"], traits={"a": S_NEUT})]),
        manifest={"yb.a": {"tool_traits": S_EXPL}, "yb.b": {}, "yb.c.d": {}},
    )
    add("python-allowed-star-and-name", one([py(allowed=["*", "x"])]), manifest={"yb.a": {}})
    add("python-allowed-empty", one([py(allowed=[], traits={"a": S_EXPL})]), manifest={"yb.a": {}})
    add("python-allowed-string", one([py(allowed="a", traits={"a": S_EXPL})]))
    add("python-allowed-dotted", one([py(allowed=["yb.a", "b"])]), manifest={"yb.a": {}})
    add("python-allowed-dup-padded", one([py(allowed=["a", " a ", "", None, "b"])]))
    add(
        "python-manifest-not-allowed",
        one([py(allowed=["a"])]),
        manifest={"yb.z": {"tool_traits": S_EXPL}},
    )
    # wildcards
    add(
        "python-star-wins",
        one(
            [
                py(
                    allowed=["a", "b"],
                    traits={
                        "a": {"strategy": ["exploration"], "x": 1},
                        "*": {"strategy": "neutral"},
                    },
                )
            ]
        ),
    )
    add("python-star-only", one([py(allowed=["a", "b"], traits={"*": S_EXPT})]))
    add(
        "mcp-star-wins",
        one(
            [
                mcp(
                    allowed=["open", "click"],
                    traits={
                        "open": {"strategy": ["exploration"], "extra": "k"},
                        "*": {"strategy": ["neutral"]},
                    },
                )
            ]
        ),
    )
    add(
        "mcp-star-qualified",
        one([mcp(allowed=["open"], traits={"mcp.mcp_web.*": S_NEUT, "open": S_EXPL})]),
    )
    add("mcp-alias-star", one([mcp(allowed=["open"], traits={"mcp_web.*": S_NEUT})]))
    add(
        "mcp-alias-star-explicit-alias",
        one([mcp(allowed=["open"], alias="b", traits={"b.*": S_NEUT, "b.open": S_EXPL})]),
    )
    add(
        "mcp-order-of-candidates",
        one(
            [
                mcp(
                    allowed=["open"],
                    alias="b",
                    traits={
                        "mcp.b.open": {"strategy": "exploration", "k1": 1},
                        "mcp.b.*": {"k1": 2, "k2": 2},
                        "*": {"k2": 3, "k3": 3},
                    },
                )
            ]
        ),
    )
    add(
        "two-mcp-share-alias",
        one(
            [
                mcp("s1", allowed=["open"], alias="web", traits={"*": S_EXPL}),
                mcp("s2", allowed=["click"], alias="web", traits={"click": S_EXPT}),
            ]
        ),
    )
    add(
        "two-mcp-share-alias-same-tool",
        one(
            [
                mcp("s1", allowed=["open"], alias="web", traits={"open": S_EXPL}),
                mcp("s2", allowed=["open"], alias="web", traits={"open": {"x": 1}}),
            ]
        ),
    )
    add(
        "two-mcp-share-alias-star",
        one(
            [
                mcp("s1", allowed=["*"], alias="web"),
                mcp("s2", allowed=["click"], alias="web"),
            ]
        ),
        manifest={"mcp.web.open": {}, "mcp.web.click": {"tool_traits": S_EXPT}},
    )
    add(
        "two-python-share-alias",
        one(
            [
                py(allowed=["a"], traits={"a": S_EXPL}),
                py(allowed=["b"], traits={"a": {"x": 1}, "b": S_EXPT}),
            ]
        ),
    )
    # dotted keys
    add(
        "dotted-cross-connection",
        one(
            [
                py(alias="ya", allowed=["x"], traits={"yb.u": S_EXPT}),
                py(alias="yb", allowed=["u"]),
            ]
        ),
    )
    add("dotted-own-alias", one([py(allowed=["u"], traits={"yb.u": S_EXPT})]))
    add(
        "dotted-python-to-mcp",
        one(
            [
                py(alias="ya", allowed=["x"], traits={"web.open": S_NEUT}),
                mcp(allowed=["open"], alias="web"),
            ]
        ),
    )
    add(
        "dotted-mcp-key-other-alias",
        one(
            [
                mcp(
                    allowed=["open", "x.y"], alias="web", traits={"x.y": S_EXPL, "web.open": S_EXPT}
                ),
            ]
        ),
    )
    add(
        "dotted-mcp-full-id-other",
        one(
            [
                mcp("s1", allowed=["open"], alias="w1", traits={"mcp.w2.open": S_EXPT}),
                mcp("s2", allowed=["open"], alias="w2"),
            ]
        ),
    )
    add(
        "python-star-reaches-mcp",
        one(
            [
                py(alias="web", allowed=["a"], traits={"*": S_EXPT}),
                mcp(allowed=["open"], alias="web"),
            ]
        ),
    )
    add("mcp-dotted-tool-name", one([mcp(allowed=["a.b"], alias="w", traits={"a.b": S_EXPL})]))
    # agents
    agents2 = {
        "main": {"tools": [py(alias="m", allowed=["a"])]},
        "other": {"tools": [py(alias="o", allowed=["b"])]},
    }
    add("agent-named", policy_of(agents2), agent="other")
    add("agent-unknown-falls-to-main", policy_of(agents2), agent="nobody")
    add(
        "agent-unknown-default-agent",
        policy_of(
            {
                "default_agent": {"tools": [py(alias="d", allowed=["a"])]},
                "main": {"tools": [py(alias="m", allowed=["a"])]},
            }
        ),
        agent="x",
    )
    add(
        "agent-unknown-default",
        policy_of({"default": {"tools": [py(alias="d", allowed=["a"])]}}),
        agent="x",
    )
    add(
        "agent-unknown-none",
        policy_of({"other": {"tools": [py(alias="o", allowed=["a"])]}}),
        agent="x",
    )
    add(
        "agent-dash",
        policy_of(
            {
                "a_b": {"tools": [py(alias="ab", allowed=["a"])]},
                "main": {"tools": [py(alias="m", allowed=["a"])]},
            }
        ),
        agent="a-b",
    )
    add("agent-dot", policy_of({"a_b": {"tools": [py(alias="ab", allowed=["a"])]}}), agent="a.b")
    add("agent-padded", policy_of({"a": {"tools": [py(alias="aa", allowed=["a"])]}}), agent=" a ")
    add(
        "agent-no-tools-list",
        policy_of({"a": {"tools": {"x": 1}}, "main": {"tools": [py(alias="m", allowed=["a"])]}}),
        agent="a",
    )
    add(
        "agent-no-tools",
        policy_of({"a": {}, "main": {"tools": [py(alias="m", allowed=["a"])]}}),
        agent="a",
    )
    add(
        "legacy-tools-agents",
        {"tools": {"agents": {"main": [py(allowed=["a"], traits={"a": S_EXPL})]}}},
    )
    add("legacy-default", {"tools": {"agents": {"default": [py(allowed=["a"])]}}}, agent="x")
    add("legacy-main-not-fallback", {"tools": {"agents": {"main": [py(allowed=["a"])]}}}, agent="x")
    add(
        "legacy-ignored-when-surface",
        {
            "surfaces": {
                "as_consumer": {"agents": {"main": {"tools": [py(alias="s", allowed=["a"])]}}}
            },
            "tools": {"agents": {"main": [py(allowed=["a"])]}},
        },
    )
    add(
        "legacy-when-surface-lacks-agent",
        {
            "surfaces": {
                "as_consumer": {"agents": {"z": {"tools": [py(alias="s", allowed=["a"])]}}}
            },
            "tools": {"agents": {"x": [py(allowed=["a"])]}},
        },
        agent="x",
    )
    add(
        "legacy-named-service",
        {"tools": {"agents": {"main": [ns({"task": {"allowed": ["object.search"]}})]}}},
    )
    # named services
    add(
        "ns-unknown-ops",
        one([ns({"task": {"allowed": ["object.search", "object.bogus", "*", "search_objects"]}})]),
    )
    add(
        "ns-only-unknown",
        one([ns({"task": {"allowed": ["object.bogus"]}}), py(alias="z", allowed=["a"])]),
    )
    add(
        "ns-capabilities",
        one(
            [
                ns(
                    {"task": {"allowed": ["provider.capabilities", "provider.about"]}},
                    traits={"provider_capabilities": S_EXPL, "provider_about": S_EXPL},
                )
            ]
        ),
    )
    add("ns-capabilities-only", one([ns({"task": {"allowed": ["provider.capabilities"]}})]))
    add(
        "ns-all-ops",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": [
                                "object.delete",
                                "object.action",
                                "object.host_file",
                                "object.upsert",
                                "object.schema",
                                "object.get",
                                "object.search",
                                "object.list",
                                "provider.about",
                            ]
                        }
                    }
                )
            ]
        ),
    )
    add("ns-allowed-operations-key", one([ns({"task": {"allowed_operations": ["object.get"]}})]))
    add("ns-operations-key", one([ns({"task": {"operations": ["object.list"]}})]))
    add(
        "ns-allowed-empty-falls-through",
        one([ns({"task": {"allowed": [], "operations": ["object.list"]}})]),
    )
    add(
        "ns-trait-by-operation-id",
        one([ns({"task": {"allowed": ["object.search"]}}, traits={"object.search": S_EXPL})]),
    )
    add(
        "ns-override",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {"search_objects": S_EXPT},
                        }
                    },
                    traits={"search_objects": NEUTRAL_EARLY},
                )
            ]
        ),
    )
    add(
        "ns-override-only",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {
                                "search_objects": {"strategy": "exploitation", "x": [1]}
                            },
                        }
                    }
                )
            ]
        ),
    )
    add(
        "ns-override-empty",
        one([ns({"task": {"allowed": ["object.search"], "tool_traits": {"search_objects": {}}}})]),
    )
    add(
        "ns-override-no-strategy",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {"search_objects": {"x": 1}},
                        }
                    }
                )
            ]
        ),
    )
    add(
        "ns-two-namespaces",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search", "object.upsert"],
                            "tool_traits": {"upsert_object": S_EXPT},
                        },
                        "mem": {
                            "allowed": ["object.search", "object.get"],
                            "tool_traits": {"search_objects": S_NEUT},
                        },
                    },
                    traits={"search_objects": S_EXPL},
                )
            ]
        ),
    )
    add(
        "ns-namespace-case",
        one(
            [
                ns(
                    {
                        "Task": {
                            "allowed": ["object.search", "object.upsert"],
                            "tool_traits": {"search_objects": S_EXPT},
                        }
                    }
                )
            ]
        ),
    )
    add(
        "ns-namespace-colon",
        one(
            [
                ns(
                    {
                        "task:": {
                            "allowed": ["object.upsert"],
                            "tool_traits": {"upsert_object": S_EXPT},
                        }
                    }
                )
            ]
        ),
    )
    add(
        "ns-override-unallowed-tool",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": ["object.search"],
                            "tool_traits": {"get_object": S_EXPT},
                        },
                        "mem": {"allowed": ["object.get"]},
                    }
                )
            ]
        ),
    )
    add(
        "ns-other-agent-namespace",
        policy_of(
            {
                "main": {"tools": [ns({"task": {"allowed": ["object.search", "object.upsert"]}})]},
                "b": {
                    "tools": [
                        ns(
                            {
                                "mem": {
                                    "allowed": ["object.upsert"],
                                    "tool_traits": {"search_objects": S_EXPT},
                                }
                            }
                        )
                    ]
                },
            }
        ),
    )
    add(
        "ns-other-agent-override",
        policy_of(
            {
                "main": {"tools": [ns({"task": {"allowed": ["object.search"]}})]},
                "b": {
                    "tools": [
                        ns(
                            {
                                "task": {
                                    "allowed": ["object.search"],
                                    "tool_traits": {"search_objects": S_EXPT},
                                }
                            }
                        )
                    ]
                },
            }
        ),
        agent="main",
    )
    add(
        "ns-two-connections-same-alias",
        one(
            [
                ns({"task": {"allowed": ["object.search"]}}),
                ns(
                    {"mem": {"allowed": ["object.get"], "tool_traits": {"get_object": S_NEUT}}},
                    traits={"get_object": S_EXPL},
                ),
            ]
        ),
    )
    add(
        "ns-two-connections-two-aliases",
        one(
            [
                ns({"task": {"allowed": ["object.search"]}}, alias="n1"),
                ns(
                    {"mem": {"allowed": ["object.upsert"]}},
                    alias="n2",
                    traits={"upsert_object": S_EXPT},
                ),
            ]
        ),
    )
    add(
        "ns-star-trait",
        one([ns({"task": {"allowed": ["object.search", "object.get"]}}, traits={"*": S_EXPL})]),
    )
    add(
        "ns-star-op-other-ns",
        one(
            [
                ns(
                    {
                        "task": {"allowed": ["object.search", "*"]},
                        "mem": {"allowed": ["object.upsert"]},
                    }
                )
            ]
        ),
    )
    add("ns-allowed-string", one([ns({"task": {"allowed": "object.upsert"}})]))
    add(
        "ns-namespace-not-mapping",
        one([ns({"task": ["object.search"], "mem": {"allowed": ["object.get"]}})]),
    )
    add("ns-namespaces-not-mapping", one([ns(["task"]), py(alias="z", allowed=["a"])]))
    add(
        "ns-after-python-same-alias",
        one([py(alias="named_services", allowed=["a"]), ns({"task": {"allowed": ["object.get"]}})]),
    )
    add(
        "ns-order-fixed",
        one(
            [
                ns(
                    {
                        "task": {
                            "allowed": [
                                "object.upsert",
                                "object.get",
                                "provider.about",
                                "object.search",
                            ]
                        }
                    }
                )
            ]
        ),
    )
    add(
        "ns-with-mcp-and-python",
        one([mcp(allowed=["open"]), ns({"task": {"allowed": ["object.get"]}}), py(allowed=["a"])]),
    )
    # trait values
    add(
        "strategy-empty-overrides-manifest",
        one([py(allowed=["a"], traits={"a": {"strategy": []}})]),
        manifest={
            "yb.a": {"tool_traits": {"strategy": ["exploration"], "execution": dict(PROFILE)}}
        },
    )
    add(
        "strategy-invalid",
        one(
            [
                py(
                    allowed=["a", "b", "c"],
                    traits={
                        "a": {"strategy": "bogus"},
                        "b": {"strategy": 5},
                        "c": {"strategy": None},
                    },
                )
            ]
        ),
    )
    add(
        "empty-entry-ignored",
        one([py(allowed=["a"], traits={"a": {}})]),
        manifest={"yb.a": {"tool_traits": S_EXPL}},
    )
    add(
        "entry-not-mapping",
        one([py(allowed=["a", "b"], traits={"a": "exploration", "b": ["neutral"]})]),
    )
    add(
        "manifest-code-layer",
        one([py(allowed=["a"], traits={"a": {"strategy": ["neutral"]}})]),
        manifest={
            "yb.a": {
                "tool_traits": {"strategy": ["exploration"], "execution": dict(PROFILE), "k": "v"}
            }
        },
    )
    add(
        "manifest-mcp",
        one([mcp(allowed=["open"], traits={"open": {"k": 2}})]),
        manifest={"mcp.mcp_web.open": {"tool_traits": {"strategy": "Exploration ", "k": 1}}},
    )
    add(
        "manifest-mcp-star",
        one([mcp(allowed=["*"])]),
        manifest={
            "mcp.mcp_web.open": {"tool_traits": S_EXPL},
            "mcp.mcp_web.a.b": {},
            "mcp.other.x": {},
        },
    )
    add(
        "manifest-ns-ignored",
        one([ns({"task": {"allowed": ["object.get"]}})]),
        manifest={"named_services.get_object": {"tool_traits": S_EXPT}},
    )
    add(
        "execution-values",
        one(
            [
                py(
                    allowed=["a", "b", "c"],
                    traits={
                        "a": {
                            "strategy": "neutral",
                            "execution": {
                                "trigger": " Tool_Call_Complete ",
                                "concurrency": None,
                                "queue": "Q",
                                "replay": 5,
                            },
                        },
                        "b": {"strategy": "neutral", "execution": "early"},
                        "c": {
                            "strategy": "neutral",
                            "execution": dict(PROFILE),
                            "extra": {"a": 1},
                            " padded ": "x",
                            "": "drop",
                        },
                    },
                )
            ]
        ),
    )
    add(
        "trait-key-padded-strategy",
        one([py(allowed=["a"], traits={"a": {" strategy ": "exploitation"}})]),
    )
    add("tool-traits-not-mapping", one([py(allowed=["a"], traits=["a"])]))
    add("trait-key-empty", one([py(allowed=["a"], traits={"": S_EXPL, " a ": S_EXPT})]))
    add("trait-key-unknown", one([py(allowed=["a"], traits={"zz": S_EXPL})]))
    # roles
    for role in ("parent", "child", None):
        add(f"role-{role}", one([py(allowed=["a"])]), role=role)
    add("role-child-no-tools", policy_of({}), role="child")
    add("empty-policy", {}, role="parent")
    return cases


# ----- random policies -----------------------------------------------------------------------
_TRAIT_VALUES: list[Any] = [
    S_EXPL,
    S_EXPT,
    S_NEUT,
    NEUTRAL_EARLY,
    {},
    {"strategy": []},
    {"strategy": "bogus"},
    {"strategy": ["neutral", "exploration"]},
    {"x": 1},
    {"strategy": "Exploitation", "k": [1, 2]},
    {"execution": dict(PROFILE)},
    {"strategy": ["unknown"]},
    {"k": {"a": 1}},
]
_OPS = [
    "provider.about",
    "object.list",
    "object.search",
    "object.get",
    "object.schema",
    "object.upsert",
    "object.host_file",
    "object.action",
    "object.delete",
    "provider.capabilities",
    "object.bogus",
    "*",
]
_CALLABLES = [
    "provider_about",
    "list_objects",
    "search_objects",
    "get_object",
    "object_schema",
    "upsert_object",
    "host_file",
    "object_action",
    "delete_object",
    "provider_capabilities",
]
_NAMES = ["a", "b", "c", "open", "click"]


def _rand_traits(r: random.Random, keys: list[str]) -> dict[str, Any]:
    return {k: r.choice(_TRAIT_VALUES) for k in r.sample(keys, r.randint(0, min(3, len(keys))))}


def _rand_connection(r: random.Random, aliases: list[str]) -> dict[str, Any]:
    kind = r.choice(["python", "python", "mcp", "mcp", "named_service"])
    conn: dict[str, Any] = {"kind": r.choice([kind, kind, kind.upper(), f" {kind} "])}
    alias = r.choice(aliases)
    if kind == "python":
        if r.random() < 0.9:
            conn["module"] = "pkg.tools"
        conn[r.choice(["alias", "alias", "name"])] = alias
        names = r.sample(_NAMES, r.randint(1, 3))
        if r.random() < 0.15:
            names = ["*"]
        elif r.random() < 0.1:
            names = []
        if r.random() < 0.9:
            conn["allowed"] = names
        keys = names + ["*", f"{r.choice(aliases)}.{r.choice(_NAMES)}", "zz"]
        conn["tool_traits"] = _rand_traits(r, keys)
    elif kind == "mcp":
        conn[r.choice(["server_id", "server", "name"])] = r.choice(["web", "db"])
        if r.random() < 0.6:
            conn["alias"] = alias
        names = r.sample(_NAMES, r.randint(1, 3))
        if r.random() < 0.15:
            names = ["*"]
        conn[r.choice(["allowed", "allowed", "tools"])] = names
        keys = names + [
            "*",
            f"{r.choice(aliases)}.{r.choice(_NAMES)}",
            f"mcp.{alias}.*",
            f"mcp.{alias}.{r.choice(_NAMES)}",
        ]
        conn["tool_traits"] = _rand_traits(r, keys)
    else:
        if r.random() < 0.4:
            conn["alias"] = r.choice(["named_services", "svc"])
        namespaces: dict[str, Any] = {}
        for n in r.sample(["task", "mem", "docs"], r.randint(1, 2)):
            block: dict[str, Any] = {
                r.choice(["allowed", "allowed", "operations"]): r.sample(_OPS, r.randint(1, 3))
            }
            if r.random() < 0.5:
                block["tool_traits"] = _rand_traits(r, _CALLABLES[:6])
            namespaces[n] = block
        conn["namespaces"] = namespaces
        conn["tool_traits"] = _rand_traits(r, _CALLABLES + ["object.search", "*"])
    return conn


def _random_cases(n: int) -> list[tuple[str, dict[str, Any]]]:
    r = random.Random(20260517)
    out = []
    for i in range(n):
        aliases = r.sample(["ya", "yb", "web", "db", "svc"], 3)
        agents: dict[str, Any] = {}
        for name in r.sample(["main", "a", "b-c", "default_agent"], r.randint(1, 2)):
            agents[name] = {"tools": [_rand_connection(r, aliases) for _ in range(r.randint(1, 4))]}
        manifest: dict[str, Any] = {}
        for _ in range(r.randint(0, 3)):
            alias = r.choice(aliases)
            prefix = r.choice(["", "mcp."])
            manifest[f"{prefix}{alias}.{r.choice(_NAMES)}"] = {
                "tool_traits": r.choice(_TRAIT_VALUES)
            }
        agent = r.choice([*agents, "nobody", "b.c"])
        role = r.choice(["parent", "parent", "child", None])
        out.append(
            (
                f"random-{i}",
                {"policy": policy_of(agents), "agent": agent, "manifest": manifest, "role": role},
            )
        )
    return out


def _legacy_form(case: Mapping[str, Any]) -> dict[str, Any] | None:
    """The case in the legacy shape (issue 37 §6): each agent's tools list moved from
    ``surfaces.as_consumer.agents.<agent>.tools`` to ``tools.agents.<agent>``; ``None`` when the
    case has no such list or already uses ``tools``."""
    policy = case.get("policy")
    if not isinstance(policy, Mapping) or "tools" in policy:
        return None
    surfaces = policy.get("surfaces")
    consumer = surfaces.get("as_consumer") if isinstance(surfaces, Mapping) else None
    agents = consumer.get("agents") if isinstance(consumer, Mapping) else None
    if not isinstance(agents, Mapping):
        return None
    legacy = {
        key: agent["tools"]
        for key, agent in agents.items()
        if isinstance(agent, Mapping) and isinstance(agent.get("tools"), list)
    }
    if not legacy:
        return None
    rest = {k: v for k, v in policy.items() if k != "surfaces"}
    return {**case, "policy": {**rest, "tools": {"agents": legacy}}}


def _legacy_cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, case in _hand_cases():
        legacy = _legacy_form(case)
        # (A manifest is stored per editor agent, which a legacy id is not: the API's front
        # door could not replay such a case.)
        if legacy is not None and not case.get("manifest"):
            out.append((f"legacy-{name}", legacy))
    out.append(
        (
            "legacy-named-service-default-agent",
            {
                "policy": {
                    "tools": {
                        "agents": {
                            "default_agent": [
                                {
                                    "kind": "named_service",
                                    "alias": "named_services",
                                    "namespaces": {
                                        "task": {
                                            "allowed_operations": [
                                                "provider.about",
                                                "object.get",
                                                "object.schema",
                                                "object.upsert",
                                                "object.delete",
                                                "object.action",
                                            ]
                                        }
                                    },
                                }
                            ]
                        }
                    }
                },
                "agent": "default_agent",
                "manifest": {},
                "role": "parent",
            },
        )
    )
    return out


def all_inputs() -> list[tuple[str, dict[str, Any]]]:
    return _hand_cases() + _random_cases(160) + _legacy_cases()


# ----- the runtime's side ------------------------------------------------------------------
def runtime_tools(rt: Any, case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model-facing tools of the case's agent as the runtime builds them: adapters, then the
    react built-ins for the role."""
    from conformance.runtime_policy import agent_adapters

    adapters = agent_adapters(
        rt, case["policy"], case["agent"], manifest=case["manifest"], role=case["role"]
    )
    out = []
    for adapter in adapters:
        metadata = adapter.get("metadata") if isinstance(adapter.get("metadata"), Mapping) else {}
        out.append(
            {
                "id": adapter.get("id"),
                "traits": dict(adapter.get("tool_traits") or {}),
                "overrides": dict(metadata.get("tool_traits_by_namespace") or {}),
                "namespaces": list(metadata.get("namespaces_applicable") or []),
            }
        )
    for spec in rt.react_call.get_react_tools_catalog(subagent_role=case["role"]):
        out.append(
            {
                "id": spec.get("id"),
                "traits": dict(spec.get("tool_traits") or {}),
                "overrides": {},
                "namespaces": [],
            }
        )
    return out


def canonical(case: Any) -> Any:
    """The input as the fixture file stores it (keys sorted): the runtime must see the same
    mapping order Traitdeck will read back."""
    return json.loads(json.dumps(case, sort_keys=True))


def record(rt: Any) -> list[dict[str, Any]]:
    out = []
    for name, case in all_inputs():
        case = canonical(case)
        out.append({"id": name, "input": case, "runtime": runtime_tools(rt, case)})
    return out


# ----- Traitdeck's side ----------------------------------------------------------------------
def predict(case: dict[str, Any]) -> Any:
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_consumer

    resolution = resolve_consumer(
        case["policy"], case["agent"], parse_manifest(case["manifest"]), role=case["role"]
    )
    return [
        {
            "id": tool.tool_id,
            "traits": tool.normalized_traits,
            "overrides": {ns: dict(t) for ns, t in tool.normalized_overrides.items()},
            "namespaces": list(tool.namespaces_applicable),
        }
        for tool in resolution.listing
    ]
