"""How the runtime loads one agent's tool configuration (DESIGN §2.6, §2.10 item 9): which
connections it reads, the table of configured traits, and the list of model-facing tools.

The runtime reads the policy per agent, not per connection:

- it picks the agent's connections by trying the agent id, its normalized forms, then
  ``default_agent``, ``main`` and ``default`` (an entry counts only with a ``tools`` list), and
  falls back to the legacy ``tools.agents`` shape;
- every ``tool_traits`` key of every connection is qualified into one agent-wide table keyed by
  tool id (a later connection's entry for the same id replaces the earlier one whole), so a dotted
  key reaches the tool of another connection and a ``"*"`` reaches every tool of its alias;
- it lists python and named-service tools (connection order), then MCP tools.

Python modules and MCP servers are not reachable from here: a python connection is taken to offer
its ``allowed`` names plus the manifest's tools of its alias, an MCP connection its ``allowed``
names (the manifest's tools under ``*``) — the same stand-ins the conformance recorder gives the
runtime.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.vocabulary import EARLY_PROFILE, EXECUTION, STRATEGY
from engine.document.paths import AGENTS, Path
from engine.tools.manifest import Manifest
from engine.tools.named_services import (
    DEFAULT_AGENT_KEY,
    DEFAULT_REACT_AGENT_ID,
    NamedServiceTool,
    kind_of,
    module_tools,
    text,
)
from engine.traits.traits import normalize_strategy

PYTHON: Final = "python"
MCP: Final = "mcp"
NAMED_SERVICE: Final = "named_service"
NAMED_SERVICE_DEFAULT_ALIAS: Final = "named_services"
WILDCARD: Final = "*"

#: Provider operation → the callable the agent is allowed (the runtime's config loader's table).
OPERATION_CALLABLES: Final[Mapping[str, str]] = {
    "provider.about": "provider_about",
    "provider.capabilities": "provider_capabilities",
    "object.list": "list_objects",
    "object.search": "search_objects",
    "object.get": "get_object",
    "object.schema": "object_schema",
    "object.upsert": "upsert_object",
    "object.host_file": "host_file",
    "object.action": "object_action",
    "object.delete": "delete_object",
}


def runtime_traits(value: Any) -> dict[str, Any]:
    """A trait mapping exactly as the runtime normalizes it: keys trimmed (empty ones dropped),
    ``strategy`` normalized, the four early-profile fields of a mapping ``execution`` turned into
    trimmed lower-case strings (other fields as written), every other value as written."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, raw in value.items():
        name = text(key)
        if not name:
            continue
        if name == STRATEGY:
            out[name] = list(normalize_strategy(raw))
        elif name == EXECUTION and isinstance(raw, Mapping):
            execution = dict(raw)
            for part in EARLY_PROFILE:
                if part in execution:
                    execution[part] = text(execution[part]).lower()
            out[name] = execution
        else:
            out[name] = raw
    return out


def trait_keys(value: Any) -> dict[str, Any]:
    """A raw trait mapping with its keys read the runtime's way (trimmed, empty dropped; the
    later of two keys that read the same wins, at the first one's place). Values as written."""
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):
        for key, raw in value.items():
            if text(key):
                out[text(key)] = raw
    return out


def string_list(value: Any) -> list[str]:
    """A list value as the runtime reads it: a scalar is one item; items trimmed, empty and
    repeated ones dropped."""
    if value is None:
        items: list[Any] = []
    elif isinstance(value, list | tuple | set):
        items = list(value)
    else:
        items = [value]
    out: dict[str, None] = {}  # a dict, not a list: an allowed list may name 10k tools
    for item in items:
        name = text(item)
        if name:
            out.setdefault(name)
    return list(out)


def trait_tool_id(alias: str, key: Any, kind: str) -> str:
    """The tool id a ``tool_traits`` key names (``""``: none). ``*`` → ``<alias>.*``; python and
    named services: a dotted key is taken as a full id, else ``<alias>.<key>``; MCP: ``mcp.``
    keys stay, ``<alias>.T`` and ``T`` become ``mcp.<alias>.T`` (``X.T`` → ``mcp.<alias>.X.T``)."""
    name = text(key)
    if not name:
        return ""
    if name == WILDCARD:
        return f"{alias}.*"
    if kind == MCP:
        if name.startswith("mcp."):
            return name
        if name.startswith(f"{alias}."):
            name = name[len(alias) + 1 :]
        return f"mcp.{alias}.{name}"
    return name if "." in name else f"{alias}.{name}"


def parse_tool_id(tool_id: str) -> tuple[str, str]:
    """(provider, tool name) the way the runtime splits an id when it filters by ``allowed``."""
    parts = [part for part in tool_id.split(".") if part]
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) >= 3:
        return parts[1], ".".join(parts[2:])
    return (parts[0], "") if parts else ("", "")


def trait_candidates(tool_id: str, alias: str, name: str) -> tuple[str, ...]:
    """The table keys applied to one tool, lowest first (later wins per trait key): the tool's
    own id, then wildcards — so a wildcard overrides a concrete entry for the same trait key."""
    candidates = [tool_id, f"{alias}.{name}" if alias and name else "", f"{alias}.*", "*"]
    if tool_id.startswith("mcp."):
        parts = tool_id.split(".", 2)
        if len(parts) == 3:
            candidates.insert(1, f"mcp.{parts[1]}.*")
    return tuple(key for key in candidates if key)


@dataclass(frozen=True)
class TraitEntry:
    """One row of the agent-wide trait table: the entry the runtime keeps for a tool id."""

    tool_id: str
    traits: Mapping[str, Any]
    path: Path
    connection_index: int
    #: Earlier entries for the same id that this one replaced whole.
    replaced: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Offered:
    """One entry of the runtime's tool list, before traits are applied."""

    tool_id: str
    alias: str
    callable: str
    kind: str
    connection_index: int
    origin: Path
    origin_is_key: bool = False
    named_service: NamedServiceTool | None = None


@dataclass(frozen=True)
class Loaded:
    """What the runtime reads for one agent id."""

    agent_key: Any
    tools_path: Path | None
    connections: tuple[tuple[int, Mapping[Any, Any]], ...]
    #: connection index → the alias the runtime uses (only for connections it loads)
    aliases: Mapping[int, str]
    table: Mapping[str, TraitEntry]
    allowed_by_alias: Mapping[str, tuple[str, ...] | None]
    offered: tuple[Offered, ...]
    legacy: bool = False
    skipped: Mapping[int, str] = field(default_factory=dict)


def agent_keys(agent_id: Any, *, legacy: bool = False) -> list[str]:
    """The keys the runtime tries, in order, for an agent id."""
    raw = text(agent_id)
    keys = [raw, raw or DEFAULT_REACT_AGENT_ID, raw.replace(".", "_").replace("-", "_")]
    keys += [DEFAULT_AGENT_KEY] + ([] if legacy else ["main"]) + ["default"]
    return [key for key in dict.fromkeys(keys) if key]


def select_connections(data: Any, agent_id: Any) -> tuple[Any, Path | None, list[Any], bool]:
    """(agent key, path of its tools list, the list, whether it is the legacy shape)."""
    agents = _get(data, *AGENTS)
    if isinstance(agents, Mapping):
        for key in agent_keys(agent_id):
            agent = agents.get(key)
            if isinstance(agent, Mapping) and isinstance(agent.get("tools"), list):
                return key, (*AGENTS, key, "tools"), agent["tools"], False
    legacy = _get(data, "tools", "agents")
    if isinstance(legacy, Mapping):
        for key in agent_keys(agent_id, legacy=True):
            if isinstance(legacy.get(key), list):
                return key, ("tools", "agents", key), legacy[key], True
    return None, None, [], False


def _get(data: Any, *keys: str) -> Any:
    node = data
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def named_service_callables(raw: Mapping[Any, Any]) -> list[str]:
    """The callables a named-service connection allows (provider.capabilities included: the
    config loader maps it, though the module never offers it)."""
    namespaces = raw.get("namespaces")
    out: list[str] = []
    if not isinstance(namespaces, Mapping):
        return out
    for block in namespaces.values():
        if not isinstance(block, Mapping):
            continue
        listed = block.get("allowed") or block.get("allowed_operations") or block.get("operations")
        for operation in string_list(listed):
            name = OPERATION_CALLABLES.get(operation)
            if name and name not in out:
                out.append(name)
    return out


def connection_alias(raw: Mapping[Any, Any]) -> str:
    """``alias`` (else ``name``), trimmed; a blank alias hides ``name``, as in the runtime."""
    return text(raw.get("alias") or raw.get("name"))


def mcp_server(raw: Mapping[Any, Any]) -> str:
    return text(raw.get("server_id") or raw.get("server") or raw.get("name"))


class _Builder:
    def __init__(self) -> None:
        self.specs: list[tuple[str, str, int]] = []  # (python|named_service, alias, index)
        self.mcp_specs: list[tuple[str, list[str], int]] = []
        self.allowed: dict[str, tuple[str, ...] | None] = {}
        self.table: dict[str, TraitEntry] = {}
        self.aliases: dict[int, str] = {}
        self.skipped: dict[int, str] = {}

    def merge_allowed(self, alias: str, allowed: list[str]) -> None:
        if not allowed or WILDCARD in allowed:
            self.allowed[alias] = None
            return
        if alias in self.allowed and self.allowed[alias] is None:
            return
        existing = list(self.allowed.get(alias) or ())
        known = set(existing)
        existing += [name for name in allowed if name not in known]
        self.allowed[alias] = tuple(existing)

    def merge_traits(self, alias: str, kind: str, raw: Any, index: int, path: Path) -> None:
        if not isinstance(raw, Mapping):
            return
        for key, entry in raw.items():
            tool_id = trait_tool_id(alias, key, kind)
            if not tool_id or not runtime_traits(entry):
                continue
            previous = self.table.get(tool_id)
            replaced = (*previous.replaced, previous.path) if previous is not None else ()
            self.table[tool_id] = TraitEntry(
                tool_id, trait_keys(entry), (*path, "tool_traits", key), index, replaced
            )

    def connection(self, index: int, raw: Mapping[Any, Any], path: Path) -> None:
        kind = kind_of(raw)
        alias = connection_alias(raw)
        if kind == PYTHON:
            if not alias:
                self.skipped[index] = "no-alias"
                return
            if not raw.get("module") and not raw.get("ref"):
                self.skipped[index] = "no-module"
                return
            self.specs.append((PYTHON, alias, index))
            self.merge_allowed(alias, string_list(raw.get("allowed")))
            self.merge_traits(alias, PYTHON, raw.get("tool_traits"), index, path)
        elif kind == MCP:
            server = mcp_server(raw)
            if not server:
                self.skipped[index] = "no-server"
                return
            alias = alias or f"mcp_{server}"
            listed = string_list(raw.get("allowed") or raw.get("tools")) or [WILDCARD]
            self.mcp_specs.append((alias, listed, index))
            self.merge_allowed(alias, listed)
            self.merge_traits(alias, MCP, raw.get("tool_traits"), index, path)
        elif kind == NAMED_SERVICE:
            alias = alias or NAMED_SERVICE_DEFAULT_ALIAS
            callables = named_service_callables(raw)
            if not callables:
                self.skipped[index] = "no-operation"
                return
            if not any(spec_alias == alias for _, spec_alias, _ in self.specs):
                self.specs.append((NAMED_SERVICE, alias, index))
            self.merge_allowed(alias, callables)
            self.merge_traits(alias, PYTHON, raw.get("tool_traits"), index, path)
        else:
            self.skipped[index] = "kind"
            return
        self.aliases[index] = alias


def load_agent(data: Any, agent_id: Any, manifest: Manifest | None = None) -> Loaded:
    """Everything the runtime reads for ``agent_id`` (any id: unknown ones fall back)."""
    key, tools_path, items, legacy = select_connections(data, agent_id)
    builder = _Builder()
    connections: list[tuple[int, Mapping[Any, Any]]] = []
    for index, raw in enumerate(items):
        if isinstance(raw, Mapping) and tools_path is not None:
            connections.append((index, raw))
            builder.connection(index, raw, (*tools_path, index))
    offered = _offered(data, agent_id, builder, tools_path or (), manifest)
    return Loaded(
        agent_key=key,
        tools_path=tools_path,
        connections=tuple(connections),
        aliases=builder.aliases,
        table=builder.table,
        allowed_by_alias=builder.allowed,
        offered=tuple(offered),
        legacy=legacy,
        skipped=builder.skipped,
    )


def _manifest_names(manifest: Manifest | None, prefix: str, *, dotted: bool) -> list[str]:
    names: dict[str, None] = {}
    for tool_id in manifest.tools if manifest is not None else ():
        if tool_id.startswith(prefix):
            name = tool_id[len(prefix) :]
            if name and (dotted or "." not in name):
                names.setdefault(name)
    return list(names)


def _offered(
    data: Any, agent_id: Any, builder: _Builder, tools_path: Path, manifest: Manifest | None
) -> list[Offered]:
    out: list[Offered] = []
    for kind, alias, index in builder.specs:
        origin = (*tools_path, index)
        if kind == NAMED_SERVICE:
            for tool in module_tools(data, agent_id):
                out.append(
                    Offered(
                        f"{alias}.{tool.callable}",
                        alias,
                        tool.callable,
                        kind,
                        index,
                        origin,
                        named_service=tool,
                    )
                )
            continue
        names = [n for n in builder.allowed.get(alias) or () if "." not in n]
        seen = set(names)
        discovered = _manifest_names(manifest, f"{alias}.", dotted=False)
        names += [n for n in discovered if n not in seen]
        out += [Offered(f"{alias}.{n}", alias, n, PYTHON, index, origin) for n in names]
    for alias, listed, index in builder.mcp_specs:
        origin = (*tools_path, index)
        if WILDCARD in listed:
            names = _manifest_names(manifest, f"mcp.{alias}.", dotted=True)
        else:
            names = listed
        out += [Offered(f"mcp.{alias}.{n}", alias, n, MCP, index, origin) for n in names]
    # Sets, not the tuples: every offered tool is looked up in its alias's allowed names.
    allowed = {alias: None if n is None else frozenset(n) for alias, n in builder.allowed.items()}
    return [tool for tool in out if _allowed(tool, allowed)]


def _allowed(tool: Offered, allowed_by_alias: Mapping[str, Collection[str] | None]) -> bool:
    provider, name = parse_tool_id(tool.tool_id)
    alias = tool.alias or provider
    if not alias or alias not in allowed_by_alias:
        return False
    allowed = allowed_by_alias[alias]
    return allowed is None or name in allowed or tool.tool_id in allowed
