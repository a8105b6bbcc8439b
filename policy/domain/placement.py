"""Which diagnostics belong to which tool row and which connection of the editor (by path).

The editor shows each diagnostic next to the thing it is about: a tool row, its connection, or the
agent. A diagnostic's ``path`` (``agents.main.tools[2].tool_traits.search.strategy``) is read
segment by segment, never as a string prefix, so ``search`` never catches ``search_objects`` and
``tools[1]`` never catches ``tools[12]``.

A path belongs to the tool row ``(connection index, callable)`` when it is under

- ``tools[i].tool_traits.<key>`` / ``tools[i].tool_execution.<key>`` whose key names the callable
  (MCP keys are qualified the way the runtime does; every MCP wildcard key is the ``*`` row);
- ``tools[i].allowed[k]`` (MCP also ``tools[k]``) whose item is the callable;
- ``tools[i].namespaces.<ns>.tool_traits.<callable>`` (a per-namespace override) or
  ``tools[i].namespaces.<ns>.allowed[k]`` whose operation maps to the callable;
- ``manifest["<tool id>"]…`` (the manifest layer of this agent's tools).

Any other ``tools[i]…`` path belongs to connection ``i``; any other ``agents.<agent>…`` path to the
agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.document.diagnostics import Diagnostic, Severity
from engine.tools.connections import (
    MCP,
    NAMED_SERVICE,
    NAMESPACE_LIST_KEYS,
    NOT_OFFERED_CALLABLES,
    WILDCARD,
    Connection,
    design_key_target,
    is_mcp_wildcard,
    listed_tools_key,
    mcp_tool_of,
    operation_callable,
    qualify_mcp_key,
)
from engine.tools.manifest import Manifest
from engine.tools.resolution import MANIFEST_ROOT

Segment = str | int
#: A tool row of the editor: the connection's index and the callable (``*``: MCP wildcard).
ToolKey = tuple[int, str]


class PathSyntaxError(ValueError):
    """The text is not a path as :func:`engine.document.paths.format_path` writes it."""


def parse_path(text: str) -> tuple[Segment, ...]:
    """The segments of a displayed path: ``a.b[2]["x.y"]`` → ``("a", "b", 2, "x.y")``.

    The inverse of ``format_path`` for paths below ``surfaces.as_consumer``; a quoted key stays a
    string even when it looks like a number.
    """
    segments: list[Segment] = []
    position = 0
    length = len(text)
    while position < length:
        char = text[position]
        if char == "[":
            if text.startswith('["', position):
                value, end = _quoted(text, position + 1)
                if not text.startswith("]", end):
                    raise PathSyntaxError(f"unclosed key at {position} in {text!r}")
                segments.append(value)
                position = end + 1
            else:
                end = text.find("]", position)
                if end < 0 or not text[position + 1 : end].isdigit():
                    raise PathSyntaxError(f"bad index at {position} in {text!r}")
                segments.append(int(text[position + 1 : end]))
                position = end + 1
            continue
        if char == ".":
            if not segments:
                raise PathSyntaxError(f"leading dot in {text!r}")
            position += 1
        elif segments:
            raise PathSyntaxError(f"unexpected {char!r} at {position} in {text!r}")
        end = position
        while end < length and text[end] not in ".[":
            end += 1
        if end == position or any(c in '"]' for c in text[position:end]):
            raise PathSyntaxError(f"bad key at {position} in {text!r}")
        segments.append(text[position:end])
        position = end
    return tuple(segments)


def _quoted(text: str, start: int) -> tuple[str, int]:
    """Decode the JSON string starting at ``start``; return it and the index after it."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise PathSyntaxError(f"bad quoted key in {text!r}") from exc
    if not isinstance(value, str):
        raise PathSyntaxError(f"bad quoted key in {text!r}")
    return value, end


def _segments(diagnostic: Diagnostic) -> tuple[Segment, ...]:
    try:
        return parse_path(diagnostic.path)
    except PathSyntaxError:
        return ()


@dataclass(frozen=True)
class Counts:
    errors: int = 0
    warnings: int = 0
    info: int = 0


@dataclass(frozen=True)
class Placement:
    """One agent's diagnostics, each in exactly one place (in input order within a place)."""

    tools: Mapping[ToolKey, tuple[Diagnostic, ...]] = field(default_factory=dict)
    connections: Mapping[int, tuple[Diagnostic, ...]] = field(default_factory=dict)
    agent: tuple[Diagnostic, ...] = ()

    def for_tool(self, index: int, name: str) -> tuple[Diagnostic, ...]:
        return self.tools.get((index, name), ())

    def for_connection(self, index: int) -> tuple[Diagnostic, ...]:
        return self.connections.get(index, ())

    def for_connection_tools(self, index: int) -> tuple[Diagnostic, ...]:
        """Every diagnostic on the connection and on any of its tool rows (what a wildcard
        entry, which applies to each of them, can change)."""
        rows = (found for (at, _), found in self.tools.items() if at == index)
        return (*self.for_connection(index), *(d for found in rows for d in found))

    def everything(self) -> tuple[Diagnostic, ...]:
        return (
            *self.agent,
            *(d for found in self.connections.values() for d in found),
            *(d for found in self.tools.values() for d in found),
        )

    def counts(self) -> Counts:
        """Errors, warnings and info over every place (what the agents page shows)."""
        everything = self.everything()
        return Counts(
            errors=sum(1 for d in everything if d.severity is Severity.ERROR),
            warnings=sum(1 for d in everything if d.severity is Severity.WARNING),
            info=sum(1 for d in everything if d.severity is Severity.INFO),
        )


def tool_rows(connection: Connection) -> list[str]:
    """The rows the editor shows for a connection: its offered callables, then ``*`` when an MCP
    connection has a wildcard ``tool_traits`` entry."""
    rows = connection.callables() if connection.loadable else []
    if connection.kind == MCP and connection.alias is not None and wildcard_key(connection):
        rows.append(WILDCARD)
    return rows


def wildcard_key(connection: Connection) -> str | None:
    """The ``tool_traits`` key of an MCP connection's wildcard entry (the one the runtime keeps)."""
    if connection.kind != MCP or connection.alias is None:
        return None
    found = None
    for key in connection.traits_raw():
        if isinstance(key, str) and is_mcp_wildcard(
            qualify_mcp_key(key, connection.alias), connection.alias
        ):
            found = key
    return found


def tool_target(connection: Connection, rest: Sequence[Segment]) -> str | None:
    """The callable (or ``*``) that the part of a path below ``tools[i]`` is about, if any."""
    if len(rest) < 2:
        return None
    section, key = rest[0], rest[1]
    alias = connection.alias
    if section == "tool_traits":
        if not isinstance(key, str):
            return None
        if connection.kind == MCP and alias is not None:
            qualified = qualify_mcp_key(key, alias)
            if is_mcp_wildcard(qualified, alias):
                return WILDCARD
            return mcp_tool_of(qualified, alias)
        return key
    if section == "tool_execution":
        return design_key_target(connection, key)
    if section in ("allowed", "tools") and isinstance(key, int):
        if connection.kind == NAMED_SERVICE or section != listed_tools_key(connection):
            return None
        return _list_item(connection.raw.get(section), key)
    if section == "namespaces" and connection.kind == NAMED_SERVICE and len(rest) >= 4:
        block = _mapping(_mapping(connection.raw.get("namespaces")).get(key))
        part, name = rest[2], rest[3]
        if part == "tool_traits" and isinstance(name, str):
            return name
        if part in NAMESPACE_LIST_KEYS and isinstance(name, int):
            operation = _list_item(block.get(part), name)
            callable_name = operation_callable(operation)
            return None if callable_name in NOT_OFFERED_CALLABLES else callable_name
    return None


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _list_item(items: Any, index: int) -> str | None:
    if isinstance(items, list) and 0 <= index < len(items):
        item = items[index]
        if isinstance(item, str) and item and item != WILDCARD:
            return item
    return None


def place(
    diagnostics: Iterable[Diagnostic],
    agent: str,
    connections: Sequence[Connection],
    manifest: Manifest | None = None,
) -> Placement:
    """Sort one agent's diagnostics into tool rows, connections and the agent itself.

    ``connections`` are the agent's connections as resolved (``AgentResolution.connections``).
    Diagnostics about other agents are left out. A ``manifest["<tool id>"]…`` path names no
    agent: it is placed on the row of that tool id only when ``manifest`` (the agent's own)
    holds the id, and once even when several agents' manifests gave the same finding.
    """
    by_index = {connection.index: connection for connection in connections}
    rows = {connection.index: set(tool_rows(connection)) for connection in connections}
    by_tool_id: dict[str, ToolKey] = {}
    for connection in connections:
        if connection.loadable:
            for name in connection.callables():
                # Two connections claiming one id: the later one's tool is the one the runtime uses.
                by_tool_id[connection.tool_id(name)] = (connection.index, name)

    tools: dict[ToolKey, list[Diagnostic]] = {}
    per_connection: dict[int, list[Diagnostic]] = {}
    at_agent: list[Diagnostic] = []
    for diagnostic in diagnostics:
        segments = _segments(diagnostic)
        if len(segments) >= 2 and segments[0] == MANIFEST_ROOT:
            tool_id = str(segments[1])
            key = by_tool_id.get(tool_id)
            if key is not None and manifest is not None and tool_id in manifest:
                found = tools.setdefault(key, [])
                if diagnostic not in found:
                    found.append(diagnostic)
            continue
        if len(segments) < 2 or segments[0] != "agents" or str(segments[1]) != agent:
            continue
        rest = segments[2:]
        if len(rest) < 2 or rest[0] != "tools" or not isinstance(rest[1], int):
            at_agent.append(diagnostic)
            continue
        index = rest[1]
        owner = by_index.get(index)
        if owner is None:  # not a mapping: the runtime skips it; so does the editor's list
            at_agent.append(diagnostic)
            continue
        target = tool_target(owner, rest[2:])
        if target is not None and target in rows[index]:
            tools.setdefault((index, target), []).append(diagnostic)
        else:
            per_connection.setdefault(index, []).append(diagnostic)
    return Placement(
        tools={key: tuple(found) for key, found in tools.items()},
        connections={key: tuple(found) for key, found in per_connection.items()},
        agent=tuple(at_agent),
    )


def entry_keys(connection: Connection, name: str) -> tuple[str, str]:
    """The ``tool_traits`` and ``tool_execution`` keys holding a row's entries: the keys already
    written (an MCP entry may be keyed ``mcp.A.T``), else the callable itself (``*``: the
    wildcard entry)."""
    if name == WILDCARD:
        return wildcard_key(connection) or WILDCARD, WILDCARD
    if connection.alias is None or connection.kind is None:
        return name, name
    trait_key = name
    for path, _entry in connection.config_layers(name):
        if tool_target(connection, ("tool_traits", path[-1])) == name:
            trait_key = path[-1]
            break
    design = connection.design_entry(name)
    return trait_key, design[0][-1] if design else name


def key_target(connection: Connection, key: str) -> str | None:
    """The row a ``tool_traits`` key (as written) belongs to: a callable, ``*``, or ``None``."""
    return tool_target(connection, ("tool_traits", key))
