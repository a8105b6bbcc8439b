"""Connections whose tools Traitdeck has not seen (the ``tools-unknown`` diagnostic).

An MCP or python connection that lists every tool (``allowed`` absent, empty or holding ``*``)
offers whatever its server or module lists at run time. When Traitdeck knows none of those tools
beyond the names written in ``allowed`` (no manifest, no discovered list for the alias), what a
``*`` entry or a named ``tool_traits`` key applies to cannot be checked: the runtime applies it
to every tool the server lists, so it is not an error — Traitdeck says so and blocks nothing.
"""

from __future__ import annotations

from typing import Final

from policy.domain.connections import MCP, PYTHON, WILDCARD, Connection
from policy.domain.loading import string_list

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
