"""Connections whose tools Traitdeck has not seen (the ``tools-unknown`` diagnostic).

An MCP or python connection that lists every tool (``allowed`` absent, empty or holding ``*``)
offers whatever its server or module lists at run time. When Traitdeck knows none of those tools
beyond the names written in ``allowed`` (no manifest, no discovered list for the alias), what a
``*`` entry or a named ``tool_traits`` key applies to cannot be checked: the runtime applies it
to every tool the server lists, so it is not an error — Traitdeck says so and blocks nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.catalog.catalog import render_scope
from engine.document.jsonable import jsonable
from engine.tools.connections import MCP, PYTHON, WILDCARD, Connection
from engine.tools.loading import runtime_traits, string_list, trait_candidates
from engine.tools.resolution import AgentResolution
from engine.traits.traits import is_early

CODE: Final = "tools-unknown"
#: What the effective view and the catalog show for such a connection.
EVERY_TOOL: Final = "every tool the server lists"


def lists_every_tool(connection: Connection) -> bool:
    """The connection offers every tool of its server or module (``allowed`` absent, empty or
    holding ``*``; MCP also reads ``tools``)."""
    raw = connection.raw
    if connection.kind == MCP:
        listed = string_list(raw.get("allowed") or raw.get("tools"))
    elif connection.kind == PYTHON:
        listed = string_list(raw.get("allowed"))
    else:
        return False
    return not listed or WILDCARD in listed


def tools_unknown(connection: Connection) -> bool:
    """The connection lists every tool and Traitdeck knows none beyond those named in
    ``allowed`` (the manifest layer has nothing for its alias)."""
    if not connection.loadable or not lists_every_tool(connection):
        return False
    named = set(string_list(connection.raw.get("allowed") or connection.raw.get("tools")))
    return not [name for name in connection.callables() if name not in named]


@dataclass(frozen=True)
class UnseenTools:
    """The tools of a connection Traitdeck has not seen, as one entry: ``mcp.knowledge.*``
    stands for "every tool the server lists", with the traits each of them gets from the
    connection's wildcard entries."""

    pattern: str
    connection_index: int
    traits: Mapping[str, Any]

    @property
    def scope(self) -> str:
        """The Scope block the model reads under each of those tools."""
        return render_scope(self.traits)

    def as_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "tools": EVERY_TOOL,
            "traits": jsonable(runtime_traits(self.traits)),
            "early": is_early(self.traits),
        }


def unseen_tools(resolution: AgentResolution) -> list[UnseenTools]:
    """The connections of an agent whose tools Traitdeck has not seen, in connection order."""
    loaded = resolution.loaded
    out: list[UnseenTools] = []
    for connection in resolution.connections:
        if not tools_unknown(connection) or loaded is None or connection.alias is None:
            continue
        alias = connection.alias
        prefix = f"mcp.{alias}." if connection.kind == MCP else f"{alias}."
        # A tool name no server offers: only the wildcard candidates match it.
        probe = "\x00"
        traits: dict[str, Any] = {}
        for candidate in trait_candidates(f"{prefix}{probe}", alias, probe):
            entry = loaded.table.get(candidate)
            if probe not in candidate and entry is not None:
                traits.update(entry.traits)
        out.append(UnseenTools(f"{prefix}*", connection.index, traits))
    return out


def render_unseen(unseen: list[UnseenTools]) -> str:
    """What the catalog preview shows after the listed tools: each unseen connection once."""
    parts = []
    for entry in unseen:
        parts.append(f"[*] {entry.pattern}  ({EVERY_TOOL}; Traitdeck has not seen them)\n")
        parts.append(entry.scope)
        parts.append("\n")
    return "".join(parts)
