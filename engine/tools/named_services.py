"""Which named-service tools an agent is offered, in which namespaces, with which per-namespace
trait overrides — as the runtime's named-service tool module computes them (DESIGN §2.6, §2.10).

The runtime does not read this per connection. Its namespace roster is every named-service
namespace of the whole policy (every agent's connections, plus ``named_services.namespaces``,
event sources and canvas resolvers); for each namespace it then looks up *this* agent's policy
(the first named-service connection of the agent whose ``namespaces`` has that exact key, else a
``clients`` block), and a namespace with no policy for the agent allows the read operations.
Namespace names are lower-cased, trimmed and lose a trailing ``:`` in the roster, but the policy
lookup uses that normalized name as the key — so a block written ``Task:`` is listed, yet its own
``allowed`` list and overrides are not found. Traitdeck predicts this and says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from engine.document.paths import AGENTS, Path

DEFAULT_AGENT_KEY: Final = "default_agent"
#: The agent id the runtime uses when none is given.
DEFAULT_REACT_AGENT_ID: Final = "default.react.agent"
#: What a namespace allows an agent that has no policy for it.
DEFAULT_READ_OPERATIONS: Final = frozenset(
    {"provider.about", "object.list", "object.search", "object.get", "object.schema"}
)
#: The tools of the named-service module, in the order it lists them, with their operation.
MODULE_TOOLS: Final[tuple[tuple[str, str], ...]] = (
    ("provider_about", "provider.about"),
    ("list_objects", "object.list"),
    ("search_objects", "object.search"),
    ("get_object", "object.get"),
    ("host_file", "object.host_file"),
    ("object_schema", "object.schema"),
    ("object_action", "object.action"),
    ("upsert_object", "object.upsert"),
    ("delete_object", "object.delete"),
)
NAMESPACE_LIST_KEYS: Final = ("allowed", "allowed_operations", "operations")


def text(value: Any) -> str:
    """``str(value or "").strip()``: how the runtime reads a name (``None``/``0``/``""`` → "")."""
    return str(value or "").strip()


def kind_of(raw: Mapping[Any, Any]) -> str:
    """A connection's kind as the runtime compares it: absent or empty means python; any case,
    trimmed."""
    return text(raw.get("kind") or "python").lower()


def normalize_namespace(value: Any) -> str:
    return text(value).lower().rstrip(":")


def base_namespace(value: Any) -> str:
    """``mem:notes`` → ``mem``: the runtime's policy lookup uses the part before a ``:``."""
    namespace = normalize_namespace(value)
    if ":" in namespace:
        return namespace.split(":", 1)[0].strip().lower() or namespace
    return namespace


def _safe_key(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", value.strip()).strip("_")


def agent_client_id(agent_id: Any) -> str:
    return text(agent_id) or DEFAULT_REACT_AGENT_ID


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _get(data: Any, *keys: str) -> Any:
    node = data
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _surface_agents(data: Any) -> Mapping[Any, Any]:
    return _mapping(_get(data, *AGENTS))


@dataclass(frozen=True)
class NamespacePolicy:
    """One agent's tools policy for one namespace, and where it was written."""

    allowed_operations: Any = None  # absent: the read operations
    has_allowed: bool = False
    tool_traits: Mapping[Any, Any] = field(default_factory=dict)
    traits_path: Path | None = None

    def allows(self, operation: str) -> bool:
        allowed = _allowed_values(self.allowed_operations, self.has_allowed)
        return "*" in allowed or operation in allowed


def _allowed_values(raw: Any, given: bool) -> frozenset[str]:
    if not given or raw is None or raw == "":
        return DEFAULT_READ_OPERATIONS
    if isinstance(raw, str):
        values: list[Any] = [raw]
    elif isinstance(raw, list | tuple | set):
        values = list(raw)
    else:
        return frozenset()
    normalized = {text(item) for item in values if text(item)}
    return frozenset({"*"}) if "*" in normalized else frozenset(normalized)


def _from_block(block: Mapping[Any, Any], path: Path) -> tuple[NamespacePolicy, bool]:
    """A consumer namespace block as the runtime's policy; and whether that policy is non-empty
    (an empty one lets the runtime look further, at ``clients``)."""
    listed = block.get("allowed") or block.get("allowed_operations") or block.get("operations")
    allowed: list[str] | None = None
    if isinstance(listed, Sequence) and not isinstance(listed, str | bytes):
        allowed = [str(item) for item in listed if text(item)]
    has_allowed = allowed is not None
    traits = block.get("tool_traits")
    has_traits = isinstance(traits, Mapping)
    excluded = _has_excluded_notes(block.get("excluded"))
    policy = NamespacePolicy(
        allowed_operations=allowed,
        has_allowed=has_allowed,
        tool_traits=traits if isinstance(traits, Mapping) else {},
        traits_path=(*path, "tool_traits") if has_traits else None,
    )
    return policy, has_allowed or has_traits or excluded


def _has_excluded_notes(raw: Any) -> bool:
    if not isinstance(raw, Mapping):
        return False
    for operation, note in raw.items():
        if not text(operation):
            continue
        if isinstance(note, Mapping) and (text(note.get("reason")) or text(note.get("agent_hint"))):
            return True
        if isinstance(note, str) and note.strip():
            return True
    return False


def _agent_config_keys(client_id: str) -> list[str]:
    keys: list[str] = []
    for key in (client_id, _safe_key(client_id), DEFAULT_AGENT_KEY, "main", "default"):
        if key and key not in keys:
            keys.append(key)
    return keys


def _named_service_connections(
    connections: Any, path: Path
) -> list[tuple[Mapping[Any, Any], Path]]:
    if not isinstance(connections, list):
        return []
    return [
        (item, (*path, index))
        for index, item in enumerate(connections)
        if isinstance(item, Mapping) and kind_of(item) == "named_service"
    ]


def _agent_block(data: Any, client_id: str) -> tuple[Any, Path] | None:
    agents = _surface_agents(data)
    for key in _agent_config_keys(client_id):
        if isinstance(agents.get(key), Mapping):
            return agents[key].get("tools"), (*AGENTS, key, "tools")
    return None


def namespace_policy(data: Any, namespace: str, client_id: str) -> NamespacePolicy:
    """The tools policy the runtime uses for ``namespace`` (a base namespace) and this agent."""
    found = _agent_block(data, client_id)
    configured: tuple[NamespacePolicy, bool] | None = None
    candidates: list[tuple[Mapping[Any, Any], Path]] = []
    if found is not None:
        candidates = _named_service_connections(found[0], found[1])
    for connection, path in candidates:
        block = _mapping(connection.get("namespaces")).get(namespace)
        if isinstance(block, Mapping):
            configured = _from_block(block, (*path, "namespaces", namespace))
            break
    if configured is None:
        legacy = _mapping(_get(data, "tools", "agents"))
        for key in dict.fromkeys([client_id, DEFAULT_AGENT_KEY]):
            for connection, path in _named_service_connections(
                legacy.get(key), ("tools", "agents", key)
            ):
                block = _mapping(connection.get("namespaces")).get(namespace)
                if isinstance(block, Mapping):
                    configured = _from_block(block, (*path, "namespaces", namespace))
                    break
            if configured is not None:
                break
    if configured is not None and configured[1]:
        return configured[0]
    return _clients_policy(data, namespace, client_id)


def _clients_policy(data: Any, namespace: str, client_id: str) -> NamespacePolicy:
    config = roster(data).get(namespace, {})
    clients = config.get("clients")
    if not isinstance(clients, Mapping):
        return NamespacePolicy()
    for key in dict.fromkeys([client_id, _safe_key(client_id), "default_client", "default"]):
        raw = clients.get(key)
        if isinstance(raw, Mapping) and isinstance(raw.get("tools"), Mapping):
            tools = raw["tools"]
            traits = tools.get("tool_traits")
            return NamespacePolicy(
                allowed_operations=tools.get("allowed_operations"),
                has_allowed="allowed_operations" in tools,
                tool_traits=traits if isinstance(traits, Mapping) else {},
                traits_path=None,
            )
    return NamespacePolicy()


def roster(data: Any) -> dict[str, dict[Any, Any]]:
    """Every named-service namespace of the policy (normalized name → merged config, first
    writer wins per key), in the order the runtime collects them."""
    out: dict[str, dict[Any, Any]] = {}
    for name, config in _mapping(_get(data, "named_services", "namespaces")).items():
        if normalize_namespace(name) and isinstance(config, Mapping):
            out[normalize_namespace(name)] = dict(config)

    def merge(name: Any, config: Any) -> None:
        namespace = normalize_namespace(name)
        if not namespace:
            return
        existing = out.setdefault(namespace, {})
        for key, value in _mapping(config).items():
            existing.setdefault(key, value)

    for agent in _surface_agents(data).values():
        if not isinstance(agent, Mapping):
            continue
        for connection, _ in _named_service_connections(agent.get("tools"), ()):
            namespaces = connection.get("namespaces")
            if isinstance(namespaces, Mapping):
                for name, config in namespaces.items():
                    merge(str(name), config)
        sources = agent.get("event_sources")
        for source in sources if isinstance(sources, list) else []:
            if isinstance(source, Mapping) and text(source.get("kind")).lower() == "named_service":
                merge(str(source.get("namespace") or ""), source)
    resolvers = _get(data, *AGENTS[:-1], "ui", "canvas", "resolvers")
    for resolver in resolvers if isinstance(resolvers, list) else []:
        if isinstance(resolver, Mapping) and text(resolver.get("kind")).lower() == "named_service":
            merge(str(resolver.get("namespace") or ""), resolver)
    return out


@dataclass(frozen=True)
class NamedServiceTool:
    callable: str
    namespaces: tuple[str, ...]
    #: base namespace → (raw override mapping, path of the override entry or None)
    overrides: Mapping[str, tuple[Mapping[Any, Any], Path | None]]


def module_tools(data: Any, agent_id: Any) -> list[NamedServiceTool]:
    """The tools the named-service module offers the agent, in its own order: each with the
    namespaces it applies to and the per-namespace overrides (raw, non-empty ones)."""
    namespaces = list(roster(data))
    if not namespaces:
        return []
    client_id = agent_client_id(agent_id)
    policies: dict[str, NamespacePolicy] = {}

    def policy(namespace: str) -> NamespacePolicy:
        base = base_namespace(namespace)
        if base not in policies:
            policies[base] = namespace_policy(data, base, client_id)
        return policies[base]

    out: list[NamedServiceTool] = []
    for name, operation in MODULE_TOOLS:
        applicable = [ns for ns in dict.fromkeys(namespaces) if ns and policy(ns).allows(operation)]
        if not applicable:
            continue
        overrides: dict[str, tuple[Mapping[Any, Any], Path | None]] = {}
        for namespace in applicable:
            found = policy(namespace)
            raw = found.tool_traits.get(name) or {}
            if isinstance(raw, Mapping) and any(text(key) for key in raw):
                path = (*found.traits_path, name) if found.traits_path is not None else None
                overrides[base_namespace(namespace)] = (raw, path)
        out.append(NamedServiceTool(name, tuple(applicable), overrides))
    return out
