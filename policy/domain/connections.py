"""How the runtime reads one agent connection: kind, alias and the tools it offers (DESIGN §2.6).

Everything here is lenient the way the runtime is: a value of the wrong type is treated as absent,
a connection the runtime cannot load is kept with the reason (``problem``) and offers no tools.
The validator reports what was skipped; this module only predicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from policy.domain.manifest import Manifest
from policy.domain.paths import Path

PYTHON: Final = "python"
MCP: Final = "mcp"
NAMED_SERVICE: Final = "named_service"
KINDS: Final = (PYTHON, MCP, NAMED_SERVICE)

NAMED_SERVICE_DEFAULT_ALIAS: Final = "named_services"
WILDCARD: Final = "*"

#: Provider operation → the callable the ReAct agent sees.
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
#: Mapped by the runtime, but no such callable is ever offered to the model.
NOT_OFFERED_CALLABLES: Final = frozenset({"provider_capabilities"})
CALLABLE_OPERATIONS: Final[Mapping[str, str]] = {v: k for k, v in OPERATION_CALLABLES.items()}
#: The keys a namespace block may list its operations under, in the order the runtime tries them.
NAMESPACE_LIST_KEYS: Final = ("allowed", "allowed_operations", "operations")


@dataclass(frozen=True)
class ToolEntry:
    """One tool a connection offers, and the source node that brought it in."""

    callable: str
    origin: Path
    origin_is_key: bool = False


@dataclass(frozen=True)
class Namespace:
    """A named-service namespace block: its callables and per-namespace trait overrides."""

    name: str
    path: Path
    list_key: str | None
    operations: tuple[Any, ...]
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def callables(self) -> tuple[str, ...]:
        """The callables this namespace offers, in list order."""
        out: list[str] = []
        for operation in self.operations:
            name = operation_callable(operation)
            if name is not None and name not in NOT_OFFERED_CALLABLES and name not in out:
                out.append(name)
        return tuple(out)


@dataclass(frozen=True)
class Connection:
    """One item of ``agents.<agent>.tools`` as the runtime reads it."""

    index: int
    path: Path
    raw: Mapping[Any, Any]
    kind: str | None
    alias: str | None
    alias_path: Path | None
    problem: str | None
    tools: tuple[ToolEntry, ...] = ()
    namespaces: tuple[Namespace, ...] = ()

    @property
    def loadable(self) -> bool:
        return self.kind is not None and self.problem is None

    def tool_id(self, name: str) -> str:
        if self.kind == MCP:
            return f"mcp.{self.alias}.{name}"
        return f"{self.alias}.{name}"

    def callables(self) -> list[str]:
        return [tool.callable for tool in self.tools]

    def traits_raw(self) -> Mapping[Any, Any]:
        return mapping_or_empty(self.raw.get("tool_traits"))

    def config_layers(self, name: str) -> list[tuple[Path, Mapping[Any, Any]]]:
        """The config trait entries for one callable, in the order the runtime applies them
        (later wins per key); each with the path of its ``tool_traits`` entry."""
        base = (*self.path, "tool_traits")
        traits = self.traits_raw()
        if self.kind != MCP:
            entry = traits.get(name) if isinstance(name, str) else None
            return [((*base, name), entry)] if isinstance(entry, Mapping) else []
        assert self.alias is not None
        qualified = qualified_mcp_keys(traits, self.alias)
        layers: list[tuple[Path, Mapping[Any, Any]]] = []
        for candidate in mcp_candidates(self.alias, name):
            if candidate in qualified:
                key = qualified[candidate]
                entry = traits[key]
                if isinstance(entry, Mapping):
                    layers.append(((*base, key), entry))
        return layers

    def design_entry(self, name: str) -> tuple[Path, Any] | None:
        """The ``tool_execution`` entry (Traitdeck's extension) for one callable, if any."""
        designs = mapping_or_empty(self.raw.get("tool_execution"))
        found: tuple[Path, Any] | None = None
        for key in designs:
            if design_key_target(self, key) == name:
                found = ((*self.path, "tool_execution", key), designs[key])
        return found


def mapping_or_empty(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def nonempty_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def qualify_mcp_key(key: str, alias: str) -> str:
    """The runtime's qualification of an MCP ``tool_traits`` key: ``T`` → ``mcp.A.T``,
    ``X.Y`` → ``mcp.X.Y``, ``*`` → ``A.*``, keys starting with ``mcp.`` stay."""
    if key.startswith("mcp."):
        return key
    if key == WILDCARD:
        return f"{alias}.*"
    if "." in key:
        return f"mcp.{key}"
    return f"mcp.{alias}.{key}"


def mcp_candidates(alias: str, tool: str) -> tuple[str, ...]:
    """Qualified keys applied to tool ``mcp.A.T``, lowest first: the wildcard wins over a concrete
    entry for the same trait key (a runtime surprise Traitdeck models and warns about)."""
    return (f"mcp.{alias}.{tool}", f"mcp.{alias}.*", f"{alias}.{tool}", f"{alias}.*", WILDCARD)


def is_mcp_wildcard(qualified: str, alias: str) -> bool:
    return qualified in (f"mcp.{alias}.*", f"{alias}.*", WILDCARD)


def qualified_mcp_keys(traits: Mapping[Any, Any], alias: str) -> dict[str, Any]:
    """Qualified key → the source key whose entry the runtime keeps (the later one on a clash)."""
    out: dict[str, Any] = {}
    for key in traits:
        if isinstance(key, str):
            out[qualify_mcp_key(key, alias)] = key
    return out


def mcp_tool_of(qualified: str, alias: str) -> str | None:
    """The tool of this connection a qualified key names, or ``None``."""
    prefix = f"mcp.{alias}."
    if qualified.startswith(prefix):
        name = qualified[len(prefix) :]
        if name and name != WILDCARD:
            return name
    return None


def design_key_target(connection: Connection, key: Any) -> str | None:
    """The callable a ``tool_execution`` key names (not checked against the offered tools)."""
    if not isinstance(key, str) or not key or key == WILDCARD:
        return None
    if connection.kind == MCP and connection.alias is not None:
        return mcp_tool_of(qualify_mcp_key(key, connection.alias), connection.alias)
    return key


def connection_kind(raw: Mapping[Any, Any]) -> str | None:
    """The kind the runtime uses (missing or null means python), or ``None`` when unknown."""
    kind = raw.get("kind")
    if kind is None:
        return PYTHON
    return kind if kind in KINDS else None


def mcp_server_id(raw: Mapping[Any, Any]) -> str | None:
    for key in ("server_id", "server", "name"):
        value = nonempty_str(raw.get(key))
        if value is not None:
            return value
    return None


def _alias(raw: Mapping[Any, Any], path: Path, kind: str) -> tuple[str | None, Path | None]:
    for key in ("alias", "name"):
        value = nonempty_str(raw.get(key))
        if value is not None:
            return value, (*path, key)
    if kind == MCP:
        server = mcp_server_id(raw)
        return (f"mcp_{server}" if server else None), None
    if kind == NAMED_SERVICE:
        return NAMED_SERVICE_DEFAULT_ALIAS, None
    return None, None


def read_connection(
    raw: Mapping[Any, Any], path: Path, index: int, manifest: Manifest | None
) -> Connection:
    """Predict how the runtime loads one connection mapping."""
    kind = connection_kind(raw)
    if kind is None:
        return Connection(index, path, raw, None, None, None, "its kind is not understood")
    alias, alias_path = _alias(raw, path, kind)
    problem: str | None = None
    if kind == PYTHON:
        if nonempty_str(raw.get("module")) is None and nonempty_str(raw.get("ref")) is None:
            problem = "a python connection needs module or ref"
        elif alias is None:
            problem = "a python connection needs an alias or a name"
    elif kind == MCP and mcp_server_id(raw) is None:
        problem = "an mcp connection needs server_id, server or name"
    if problem is not None or alias is None:
        return Connection(index, path, raw, kind, alias, alias_path, problem or "no alias")
    base = Connection(index, path, raw, kind, alias, alias_path, None)
    if kind == NAMED_SERVICE:
        namespaces = _namespaces(raw, path)
        tools = _named_service_tools(namespaces)
        problem = None if tools else "a named service needs at least one mapped operation"
        return Connection(
            index, path, raw, kind, alias, alias_path, problem, tools, tuple(namespaces)
        )
    return Connection(
        index, path, raw, kind, alias, alias_path, None, _listed_tools(base, manifest)
    )


def listed_tools_key(connection: Connection) -> str | None:
    """Which key lists the tools (``allowed``; mcp also ``tools``), or ``None`` when none does."""
    keys = ("allowed", "tools") if connection.kind == MCP else ("allowed",)
    for key in keys:
        value = connection.raw.get(key)
        if isinstance(value, list) and (value or connection.kind != MCP):
            return key
    return None


def _listed_tools(connection: Connection, manifest: Manifest | None) -> tuple[ToolEntry, ...]:
    key = listed_tools_key(connection)
    tools: dict[str, ToolEntry] = {}

    def add(entry: ToolEntry) -> None:
        tools.setdefault(entry.callable, entry)

    if key is None:
        # Absent (or, for mcp, empty): every tool the connection has.
        for entry in _all_tools(connection, manifest, connection.path):
            add(entry)
        return tuple(tools.values())
    items = connection.raw[key]
    for position, item in enumerate(items):
        item_path = (*connection.path, key, position)
        if item == WILDCARD:
            for entry in _all_tools(connection, manifest, item_path):
                add(entry)
        elif isinstance(item, str) and item:
            add(ToolEntry(item, item_path))
    return tuple(tools.values())


def _all_tools(connection: Connection, manifest: Manifest | None, origin: Path) -> list[ToolEntry]:
    """The manifest's tools for the alias, then the tools named by ``tool_traits`` keys."""
    assert connection.alias is not None
    assert connection.kind is not None
    out: list[ToolEntry] = []
    if manifest is not None:
        out += [
            ToolEntry(n, origin) for n in manifest.callables_for(connection.alias, connection.kind)
        ]
    for key in connection.traits_raw():
        if not isinstance(key, str) or key == WILDCARD:
            continue
        if connection.kind == MCP:
            name = mcp_tool_of(qualify_mcp_key(key, connection.alias), connection.alias)
        else:
            # A python callable is an identifier: a dotted key names no callable.
            name = key if key and "." not in key else None
        if name is not None:
            out.append(ToolEntry(name, (*connection.path, "tool_traits", key), True))
    return out


def namespace_operations(block: Mapping[Any, Any]) -> tuple[str | None, list[Any]]:
    """The list key the runtime reads operations from (first non-empty list) and its items."""
    for key in NAMESPACE_LIST_KEYS:
        value = block.get(key)
        if isinstance(value, list) and value:
            return key, value
    return None, []


def _namespaces(raw: Mapping[Any, Any], path: Path) -> list[Namespace]:
    out: list[Namespace] = []
    for name, block in mapping_or_empty(raw.get("namespaces")).items():
        if not isinstance(block, Mapping) or not isinstance(name, str):
            continue
        list_key, operations = namespace_operations(block)
        overrides = {
            key: value
            for key, value in mapping_or_empty(block.get("tool_traits")).items()
            # An empty override is ignored, like an empty config entry.
            if isinstance(key, str) and isinstance(value, Mapping) and value
        }
        out.append(
            Namespace(name, (*path, "namespaces", name), list_key, tuple(operations), overrides)
        )
    return out


def _named_service_tools(namespaces: list[Namespace]) -> tuple[ToolEntry, ...]:
    """Offered callables, first-seen across namespaces; unknown operations and ``*`` ignored."""
    tools: dict[str, ToolEntry] = {}
    for namespace in namespaces:
        for position, operation in enumerate(namespace.operations):
            name = operation_callable(operation)
            if name is None or name in NOT_OFFERED_CALLABLES:
                continue
            origin = (*namespace.path, namespace.list_key, position)
            tools.setdefault(name, ToolEntry(name, origin))
    return tuple(tools.values())


def operation_callable(operation: Any) -> str | None:
    return OPERATION_CALLABLES.get(operation) if isinstance(operation, str) else None
