"""The policies the random rounds run against (inputs shared by the recorder and the predictor):
the sample policy plus generated ones covering python / mcp / named_service connections, python and
MCP ``*``, namespace overrides (with sub-scopes), manifests, unknown and mixed strategies."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

EARLY = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}

_SAMPLE = Path(__file__).resolve().parent.parent / "policy" / "sample" / "sample-policy.yaml"


def _agents(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"surfaces": {"as_consumer": {"agents": {"main": {"tools": tools}}}}}


@functools.cache
def policies() -> dict[str, dict[str, Any]]:
    """Name → ``{"policy": …, "manifest": {…}}``."""
    return {
        "sample": {"policy": yaml.safe_load(_SAMPLE.read_text()), "manifest": {}},
        "wildcards": {
            "policy": _agents(
                [
                    {
                        "kind": "python",
                        "module": "yb_tools",
                        "alias": "yb",
                        "allowed": ["u", "v", "w"],
                        "tool_traits": {
                            "*": {"strategy": ["exploration"]},
                            "u": {"strategy": ["neutral"], "execution": dict(EARLY)},
                            "v": {"strategy": ["exploitation"]},
                        },
                    },
                    {
                        "kind": " MCP ",
                        "server_id": "m",
                        "alias": "m",
                        "allowed": ["a", "b", "c"],
                        "tool_traits": {
                            "*": {"strategy": ["neutral"]},
                            "a": {"strategy": ["exploration"], "execution": dict(EARLY)},
                            "b": {"execution": dict(EARLY)},
                        },
                    },
                ]
            ),
            "manifest": {},
        },
        "namespaces": {
            "policy": _agents(
                [
                    {
                        "kind": "named_service",
                        "alias": "named_services",
                        "namespaces": {
                            "mem": {
                                "allowed": ["object.search", "object.upsert", "object.get"],
                                "tool_traits": {
                                    "upsert_object": {
                                        "strategy": ["neutral"],
                                        "execution": dict(EARLY),
                                    },
                                    "search_objects": {"strategy": ["exploitation"]},
                                },
                            },
                            "task": {
                                "allowed": ["object.search", "object.upsert", "provider.about"]
                            },
                        },
                        "tool_traits": {
                            "search_objects": {"strategy": ["exploration"]},
                            "upsert_object": {"strategy": ["exploitation"]},
                            "get_object": {"strategy": ["neutral"], "execution": dict(EARLY)},
                            "provider_about": {"strategy": ["neutral"]},
                        },
                    },
                    {
                        "kind": "python",
                        "ref": "tools/notes.py",
                        "alias": "notes",
                        "allowed": ["jot"],
                        "tool_traits": {"jot": {"strategy": ["neutral"], "execution": dict(EARLY)}},
                    },
                ]
            ),
            "manifest": {},
        },
        "early": {
            "policy": _agents(
                [
                    {
                        "kind": "python",
                        "module": "jobs",
                        "alias": "jobs",
                        "allowed": ["launch", "schedule", "log", "export", "lookup"],
                        "tool_traits": {
                            "launch": {"strategy": ["neutral"], "execution": dict(EARLY)},
                            "schedule": {
                                "strategy": "Neutral",
                                "execution": {k: v.upper() for k, v in EARLY.items()},
                            },
                            "log": {
                                "strategy": ["neutral"],
                                "execution": {**EARLY, "replay": "always"},
                            },
                            "export": {"strategy": ["exploitation"], "execution": dict(EARLY)},
                            "lookup": {"strategy": ["exploration"]},
                        },
                    },
                ]
            ),
            "manifest": {},
        },
        "manifest": {
            "policy": _agents(
                [
                    {
                        "kind": "python",
                        "module": "kit",
                        "alias": "kit",
                        "tool_traits": {
                            "scan": {"strategy": ["exploration"]},
                            "ship": {"strategy": []},
                        },
                    },
                    {
                        "kind": "mcp",
                        "server_id": "fs",
                        "tool_traits": {"read": {"strategy": ["exploration"]}},
                    },
                ]
            ),
            "manifest": {
                "kit.scan": {
                    "tool_traits": {"strategy": ["exploitation"], "execution": dict(EARLY)}
                },
                "kit.ship": {"tool_traits": {"strategy": ["exploitation"]}},
                "kit.ping": {"tool_traits": {"strategy": ["neutral"], "execution": dict(EARLY)}},
                "kit.plain": {"tool_traits": {}},
                "mcp.mcp_fs.read": {"tool_traits": {"execution": dict(EARLY)}},
                "mcp.mcp_fs.write": {"tool_traits": {"strategy": ["exploitation"]}},
            },
        },
        "tables": {
            "policy": _agents(
                [
                    {
                        "kind": "python",
                        "module": "t",
                        "alias": "t",
                        "allowed": [
                            "exploration",
                            "exploration2",
                            "exploitation",
                            "exploitation2",
                            "neutral",
                            "neutral2",
                            "unknown",
                            "unknown2",
                            "early",
                            "early_exploit",
                        ],
                        "tool_traits": {
                            "exploration": {"strategy": ["exploration"]},
                            "exploration2": {"strategy": ["exploration"]},
                            "exploitation": {"strategy": ["exploitation"]},
                            "exploitation2": {"strategy": ["exploitation"]},
                            "neutral": {"strategy": ["neutral"]},
                            "neutral2": {"strategy": ["neutral"]},
                            "early": {"strategy": ["neutral"], "execution": dict(EARLY)},
                            "early_exploit": {
                                "strategy": ["exploitation"],
                                "execution": dict(EARLY),
                            },
                        },
                    },
                    {
                        "kind": "named_service",
                        "namespaces": {
                            "mem": {
                                "allowed": ["object.search"],
                                "tool_traits": {"search_objects": {"strategy": ["neutral"]}},
                            },
                            "task": {"allowed": ["object.search"]},
                        },
                        "tool_traits": {"search_objects": {"strategy": ["exploitation"]}},
                    },
                ]
            ),
            "manifest": {},
        },
        "mixed": {
            "policy": _agents(
                [
                    {
                        "kind": "python",
                        "module": "mix",
                        "alias": "mix",
                        "allowed": ["both", "odd", "none", "bad", "nil"],
                        "tool_traits": {
                            "both": {"strategy": ["neutral", "exploration"]},
                            "odd": {"strategy": ["exploitation", "exploration"]},
                            "bad": {"strategy": ["bogus"]},
                            "nil": {"strategy": None, "execution": dict(EARLY)},
                        },
                    },
                ]
            ),
            "manifest": {},
        },
    }
