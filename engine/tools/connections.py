"""How the runtime reads one agent connection: kind, alias and the tools it offers (DESIGN §2.6).

Everything here is lenient the way the runtime is: a value of the wrong type is treated as absent,
a connection the runtime cannot load is kept with the reason (``problem``) and offers no tools.
The validator reports what was skipped; this module only predicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from engine.document.paths import Path
from engine.tools.loading import (
    MCP as MCP,
)
from engine.tools.loading import (
    NAMED_SERVICE as NAMED_SERVICE,
)
from engine.tools.loading import (
    NAMED_SERVICE_DEFAULT_ALIAS as NAMED_SERVICE_DEFAULT_ALIAS,
)
from engine.tools.loading import (
    OPERATION_CALLABLES as OPERATION_CALLABLES,
)
from engine.tools.loading import (
    PYTHON as PYTHON,
)
from engine.tools.loading import (
    WILDCARD as WILDCARD,
)
from engine.tools.loading import (
    connection_alias,
    mcp_server,
    named_service_callables,
    trait_candidates,
    trait_tool_id,
)
from engine.tools.manifest import Manifest
from engine.tools.named_services import kind_of

KINDS: Final = (PYTHON, MCP, NAMED_SERVICE)

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
        """This connection's own trait entries for one of its callables, in the order the runtime
        applies them (later wins per key); each with the path of its ``tool_traits`` entry.
        Entries of other connections may reach the tool too (``EffectiveTool.config_layers``)."""
        base = (*self.path, "tool_traits")
        traits = self.traits_raw()
        assert self.alias is not None
        qualified = qualified_keys(traits, self.alias, self.kind or PYTHON)
        layers: list[tuple[Path, Mapping[Any, Any]]] = []
        for candidate in dict.fromkeys(trait_candidates(self.tool_id(name), self.alias, name)):
            if candidate in qualified:
                key = qualified[candidate]
                entry = traits[key]
                if isinstance(entry, Mapping):
                    layers.append(((*base, key), entry))
        return layers

    def design_entry(self, name: str) -> tuple[Path, Any] | None:
        """The ``tool_execution`` entry (Traitdeck's extension) for one callable, if any."""
        return self.design_entries().get(name)

    def design_entries(self) -> dict[str, tuple[Path, Any]]:
        """Callable → its ``tool_execution`` entry (path, value); of two keys naming the same
        callable, the later one. One pass: callers look up every tool of the connection."""
        designs = mapping_or_empty(self.raw.get("tool_execution"))
        found: dict[str, tuple[Path, Any]] = {}
        for key in designs:
            target = design_key_target(self, key)
            if target is not None:
                found[target] = ((*self.path, "tool_execution", key), designs[key])
        return found


def mapping_or_empty(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def nonempty_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def qualify_mcp_key(key: str, alias: str) -> str:
    """The runtime's qualification of an MCP ``tool_traits`` key: ``*`` → ``A.*``, keys starting
    with ``mcp.`` stay, ``A.T`` and ``T`` → ``mcp.A.T``, any other dotted ``X.T`` →
    ``mcp.A.X.T``."""
    return trait_tool_id(alias, key, MCP) or key


def is_mcp_wildcard(qualified: str, alias: str) -> bool:
    return qualified in (f"mcp.{alias}.*", f"{alias}.*", WILDCARD)


def qualified_keys(traits: Mapping[Any, Any], alias: str, kind: str) -> dict[str, Any]:
    """Qualified id → the source key whose entry the runtime keeps (the later one on a clash)."""
    out: dict[str, Any] = {}
    for key in traits:
        qualified = trait_tool_id(alias, key, MCP if kind == MCP else PYTHON)
        if qualified:
            out[qualified] = key
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
    """The kind the runtime uses (missing, null or empty means python; any case, trimmed), or
    ``None`` when it is none of the three."""
    kind = kind_of(raw)
    return kind if kind in KINDS else None


def mcp_server_id(raw: Mapping[Any, Any]) -> str | None:
    return mcp_server(raw) or None


def _alias(raw: Mapping[Any, Any], path: Path, kind: str) -> tuple[str | None, Path | None]:
    alias = connection_alias(raw)
    key = "alias" if raw.get("alias") else "name"
    if alias:
        return alias, (*path, key)
    if kind == MCP:
        server = mcp_server_id(raw)
        return (f"mcp_{server}" if server else None), None
    if kind == NAMED_SERVICE:
        return NAMED_SERVICE_DEFAULT_ALIAS, None
    return None, None


def read_connection(
    raw: Mapping[Any, Any],
    path: Path,
    index: int,
    manifest: Manifest | None = None,
    *,
    alias: str | None = None,
) -> Connection:
    """How the runtime reads one connection mapping: its kind, its alias and whether it loads.
    Its tools are known only at the agent level (``resolution`` fills them in)."""
    del manifest, alias  # the agent-level loader decides the tools
    kind = connection_kind(raw)
    if kind is None:
        return Connection(index, path, raw, None, None, None, "its kind is not understood")
    alias, alias_path = _alias(raw, path, kind)
    problem: str | None = None
    if kind == PYTHON:
        # The runtime checks the alias before the code.
        if alias is None:
            problem = "a python connection needs an alias or a name"
        elif not raw.get("module") and not raw.get("ref"):
            problem = "a python connection needs module or ref"
    elif kind == MCP and mcp_server_id(raw) is None:
        problem = "an mcp connection needs server_id, server or name"
    namespaces = tuple(_namespaces(raw, path)) if kind == NAMED_SERVICE else ()
    if kind == NAMED_SERVICE and not named_service_callables(raw):
        problem = "a named service needs at least one mapped operation"
    if problem is not None or alias is None:
        return Connection(
            index, path, raw, kind, alias, alias_path, problem or "no alias", (), namespaces
        )
    return Connection(index, path, raw, kind, alias, alias_path, None, (), namespaces)


def listed_tools_key(connection: Connection) -> str | None:
    """Which key lists the tools (``allowed``; mcp also ``tools``), or ``None`` when none does."""
    keys = ("allowed", "tools") if connection.kind == MCP else ("allowed",)
    for key in keys:
        value = connection.raw.get(key)
        if isinstance(value, list) and (value or connection.kind != MCP):
            return key
    return None


def namespace_operations(block: Mapping[Any, Any]) -> tuple[str | None, list[Any]]:
    """The key the runtime reads operations from (the first with a non-empty value) and its
    items (a single string is one item)."""
    for key in NAMESPACE_LIST_KEYS:
        value = block.get(key)
        if value:
            return key, list(value) if isinstance(value, list) else [value]
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


def operation_callable(operation: Any) -> str | None:
    name = str(operation or "").strip()
    return OPERATION_CALLABLES.get(name)
