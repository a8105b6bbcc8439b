"""Effective traits of an agent's tools, with provenance (DESIGN §2.6).

Three layers, lowest first: ``builtin`` (the ``react.*`` tools), ``manifest`` (what the runtime
discovered in code), ``config`` (the YAML). Per top-level trait key the later layer wins; a key is
replaced whole, never merged, and keeps the position where it was first inserted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from engine.document.jsonable import jsonable
from engine.document.paths import AGENTS, Path, format_path
from engine.tools.connections import (
    Connection,
    ToolEntry,
    mapping_or_empty,
    operation_callable,
    read_connection,
)
from engine.tools.loading import (
    NAMED_SERVICE,
    Loaded,
    Offered,
    load_agent,
    runtime_traits,
    trait_candidates,
    trait_keys,
)
from engine.tools.manifest import Manifest
from engine.traits.builtins import BUILTIN_ALIAS, DEFAULT_ROLE, builtin_traits, builtins_for_role
from engine.traits.execution_design import ExecutionDesign, parse_design
from engine.traits.round_policy import namespace_override
from engine.traits.traits import is_early
from engine.traits.traits import resolved_strategy as _resolved_strategy

BUILTIN = "builtin"

#: Where the manifest layer's values sit in diagnostic paths: ``manifest["a.b"].tool_traits``.
MANIFEST_ROOT = "manifest"


class UnknownAgentError(KeyError):
    """The policy has no agent of that name."""


@dataclass(frozen=True)
class EffectiveTool:
    """One model-facing tool of an agent as the runtime resolves it.

    ``traits`` is the merged raw mapping (values as written; normalize for display);
    ``provenance`` names, per trait key, the layer and place that set it.
    ``trait_paths`` holds the same per key as a path: a document path (config), a
    ``("manifest", id, "tool_traits")`` path, or ``()`` (built-in). ``origin`` is the node that
    brought the tool in.
    """

    tool_id: str
    connection_index: int | None
    callable: str
    kind: str
    traits: Mapping[str, Any]
    provenance: Mapping[str, str]
    namespace_overrides: Mapping[str, Mapping[str, Any]]
    execution_design: Mapping[str, Any]
    builtin: bool
    alias: str = ""
    origin: Path | None = None
    origin_is_key: bool = False
    trait_paths: Mapping[str, Path] = field(default_factory=dict)
    namespace_override_paths: Mapping[str, Path] = field(default_factory=dict)
    design_path: Path | None = None
    #: The namespaces the runtime lists for a named-service tool (``namespaces applicable``).
    namespaces_applicable: tuple[str, ...] = ()
    #: The config trait entries applied, lowest first: (path of the entry, its key, its traits).
    config_layers: tuple[tuple[Path, str, Mapping[str, Any]], ...] = ()

    @property
    def normalized_traits(self) -> dict[str, Any]:
        """The default trait mapping exactly as the runtime holds it."""
        return runtime_traits(self.traits)

    @property
    def normalized_overrides(self) -> dict[str, dict[str, Any]]:
        """The namespace overrides exactly as the runtime holds them."""
        return {ns: runtime_traits(t) for ns, t in self.namespace_overrides.items()}

    @property
    def strategy(self) -> tuple[str, ...]:
        """The normalized strategy of the default trait mapping (unknown when absent)."""
        return _resolved_strategy(self.traits)

    @property
    def early(self) -> bool:
        """Static early eligibility: exactly neutral with the complete early profile."""
        return is_early(self.traits)

    @property
    def design(self) -> ExecutionDesign:
        """The usable part of the tool's execution design (Traitdeck's extension, §2.8)."""
        return parse_design(self.execution_design)[0]

    def traits_for(self, params: Any) -> Mapping[str, Any]:
        """The trait mapping for one call: a namespace override replaces the whole mapping when
        ``params.namespace`` selects one (the runtime's lookup: case, trailing ``:`` and
        sub-scopes such as ``mem:notes`` fall back to ``mem``)."""
        found = namespace_override(self.namespace_overrides, params)
        return found if found is not None else self.traits


@dataclass(frozen=True)
class AgentResolution:
    """One agent's tools. ``tools`` holds each id once; ``listing`` is the runtime's list as the
    model reads it (a tool two connections both offer appears twice there)."""

    agent: str
    tools: tuple[EffectiveTool, ...]
    connections: tuple[Connection, ...] = ()
    listing: tuple[EffectiveTool, ...] = ()
    role: str = DEFAULT_ROLE
    #: The agent key whose connections the runtime reads (another agent's on a fallback), or
    #: ``None`` when it reads none; and whether that key is in the legacy ``tools.agents``.
    loaded_from: Any = None
    legacy: bool = False
    loaded: Loaded | None = None

    def __iter__(self) -> Iterator[EffectiveTool]:
        return iter(self.tools)

    def connection(self, index: int) -> Connection | None:
        """The connection at ``index`` of the agent's list (``None``: no mapping there)."""
        for connection in self.connections:
            if connection.index == index:
                return connection
        return None

    def find(self, tool_id: str) -> EffectiveTool | None:
        key = tool_id.strip() if isinstance(tool_id, str) else tool_id
        for tool in self.tools:
            if tool.tool_id == key:
                return tool
        return None

    def resolver(self) -> Callable[[str, Any], Mapping[str, Any] | None]:
        """For the overseer: the traits of a call, ``None`` for a tool the policy does not know."""
        by_id = {tool.tool_id: tool for tool in self.tools}

        def resolve(tool_id: str, params: Any) -> Mapping[str, Any] | None:
            key = tool_id.strip() if isinstance(tool_id, str) else tool_id
            tool = by_id.get(key)
            return None if tool is None else tool.traits_for(params)

        return resolve


def agents_mapping(data: Any) -> Mapping[Any, Any]:
    """``surfaces.as_consumer.agents`` when every level is a mapping, else an empty mapping."""
    node: Any = data
    for key in AGENTS:
        if not isinstance(node, Mapping):
            return {}
        node = node.get(key)
    return mapping_or_empty(node)


def agent_names(data: Any) -> list[str]:
    """The agents of a policy document, in document order."""
    return [str(name) for name in agents_mapping(data)]


def _agent_key(data: Any, agent: str) -> Any:
    agents = agents_mapping(data)
    if agent in agents:
        return agent
    for key in agents:
        if str(key) == agent:
            return key
    raise UnknownAgentError(agent)


class _Merge:
    """Per-key layering: later wins, first-insertion order kept."""

    def __init__(self) -> None:
        self.traits: dict[str, Any] = {}
        self.provenance: dict[str, str] = {}
        self.paths: dict[str, Path] = {}

    def frozen(self) -> tuple[Mapping[str, Any], Mapping[str, str], Mapping[str, Path]]:
        """Read-only views: a resolution is a prediction, not something to edit."""
        return (
            MappingProxyType(self.traits),
            MappingProxyType(self.provenance),
            MappingProxyType(self.paths),
        )

    def apply(self, layer: Mapping[Any, Any], label: str, path: Path) -> None:
        for key, value in trait_keys(layer).items():
            self.traits[key] = value
            self.provenance[key] = label
            self.paths[key] = path


#: Per list key of a connection (``allowed``, then ``tools``): each trimmed name → its first item.
_Listed = dict[str, dict[str, int]]


def _listed_positions(connection: Connection) -> _Listed:
    """Where each name first appears in the connection's lists: built once per connection, so
    finding the origins of a connection's tools stays linear in its tools (10k in one list)."""
    out: _Listed = {}
    for key in ("allowed", "tools"):
        items = connection.raw.get(key)
        if isinstance(items, list):
            first: dict[str, int] = {}
            for position, item in enumerate(items):
                if isinstance(item, str):
                    first.setdefault(item.strip(), position)
            out[key] = first
    return out


def _origin(
    connection: Connection | None, offered: Offered, listed: _Listed | None
) -> tuple[Path, bool]:
    """The node that brought a tool in: its item in the allowed list when one names it."""
    if connection is None:
        return offered.origin, False
    if connection.kind == NAMED_SERVICE and offered.named_service is not None:
        for namespace in connection.namespaces:
            for position, operation in enumerate(namespace.operations):
                if namespace.list_key and _callable_of(operation) == offered.callable:
                    return (*namespace.path, namespace.list_key, position), False
    for key, first in (listed if listed is not None else _listed_positions(connection)).items():
        # The first item naming the tool, by its callable or by its full id.
        found = [first[name] for name in (offered.callable, offered.tool_id) if name in first]
        if found:
            return (*connection.path, key, min(found)), False
    return offered.origin, False


def _callable_of(operation: Any) -> str | None:
    return operation_callable(operation.strip() if isinstance(operation, str) else operation)


@dataclass(frozen=True)
class _Indexes:
    """What every tool of an agent looks up in its connections, indexed once per resolution."""

    #: connection index → where each name first appears in its lists
    listed: Mapping[int, _Listed]
    #: alias → the ``tool_execution`` entries of its connections, in connection order
    designs: Mapping[str, tuple[Mapping[str, tuple[Path, Any]], ...]]

    @classmethod
    def of(cls, connections: Mapping[int, Connection]) -> _Indexes:
        designs: dict[str, list[Mapping[str, tuple[Path, Any]]]] = {}
        for connection in connections.values():
            if connection.alias is not None:
                designs.setdefault(connection.alias, []).append(connection.design_entries())
        return cls(
            listed={index: _listed_positions(c) for index, c in connections.items()},
            designs={alias: tuple(entries) for alias, entries in designs.items()},
        )


#: One merge of trait layers: the config layers applied, and the read-only traits, provenance
#: and paths they made.
_Merged = tuple[
    tuple[tuple[Path, str, Mapping[str, Any]], ...],
    tuple[Mapping[str, Any], Mapping[str, str], Mapping[str, Path]],
]


def _configured_tool(
    loaded: Loaded,
    offered: Offered,
    connection: Connection | None,
    indexes: _Indexes,
    manifest: Manifest | None,
    merges: dict[tuple[tuple[str, int], ...], _Merged],
) -> EffectiveTool:
    """``merges``: the trait merges already made in this resolution, by the config entries
    they merged (filled here)."""
    # The code layer: named-service tools carry no discovered traits.
    discovered = manifest.traits_for(offered.tool_id) if manifest is not None else None
    if offered.named_service is not None or not discovered:
        discovered = None  # an empty layer adds nothing
    found = [
        (candidate, entry)
        for candidate in dict.fromkeys(
            trait_candidates(offered.tool_id, offered.alias, offered.callable)
        )
        if (entry := loaded.table.get(candidate)) is not None
    ]
    # Without a code layer the merge depends only on the config entries found: thousands of
    # tools reached through one '*' share it, merged once.
    key = tuple((candidate, id(entry)) for candidate, entry in found)
    merged = merges.get(key) if discovered is None else None
    if merged is None:
        merge = _Merge()
        if discovered is not None:
            merge.apply(
                discovered,
                Manifest.provenance(offered.tool_id),
                (MANIFEST_ROOT, offered.tool_id, "tool_traits"),
            )
        for _, entry in found:
            merge.apply(entry.traits, f"config {format_path(entry.path)}", entry.path)
        layers = tuple((entry.path, candidate, entry.traits) for candidate, entry in found)
        merged = (layers, merge.frozen())
        if discovered is None:
            merges[key] = merged
    layers, (traits, provenance, paths) = merged
    overrides: dict[str, Mapping[str, Any]] = {}
    override_paths: dict[str, Path] = {}
    namespaces: tuple[str, ...] = ()
    if offered.named_service is not None:
        namespaces = offered.named_service.namespaces
        for namespace, (raw, path) in offered.named_service.overrides.items():
            overrides[namespace] = MappingProxyType(trait_keys(raw))
            override_paths[namespace] = path if path is not None else offered.origin
    design = _design_entry(indexes, offered)
    origin, origin_is_key = _origin(
        connection, offered, indexes.listed.get(offered.connection_index)
    )
    return EffectiveTool(
        tool_id=offered.tool_id,
        connection_index=offered.connection_index,
        callable=offered.callable,
        kind=offered.kind,
        traits=traits,
        provenance=provenance,
        namespace_overrides=MappingProxyType(overrides),
        execution_design=mapping_or_empty(design[1]) if design else {},
        builtin=False,
        alias=offered.alias,
        origin=origin,
        origin_is_key=origin_is_key,
        trait_paths=paths,
        namespace_override_paths=MappingProxyType(override_paths),
        design_path=design[0] if design else None,
        namespaces_applicable=namespaces,
        config_layers=layers,
    )


def _design_entry(indexes: _Indexes, offered: Offered) -> tuple[Path, Any] | None:
    """Traitdeck's execution design for a tool: from the connections of its alias, the last
    one that has an entry for it."""
    found: tuple[Path, Any] | None = None
    for entries in indexes.designs.get(offered.alias, ()):
        found = entries.get(offered.callable) or found
    return found


def _builtin_tools(role: str | None, taken: Mapping[str, Any]) -> list[EffectiveTool]:
    out = []
    for builtin in builtins_for_role(role):
        if builtin.tool_id in taken:
            continue
        merge = _Merge()
        # A copy: a caller changing a resolution must not change the runtime's constants.
        merge.apply(builtin_traits(builtin.tool_id) or {}, builtin.provenance, ())
        traits, provenance, paths = merge.frozen()
        out.append(
            EffectiveTool(
                tool_id=builtin.tool_id,
                connection_index=None,
                callable=builtin.callable,
                kind=BUILTIN,
                traits=traits,
                provenance=provenance,
                namespace_overrides={},
                execution_design={},
                builtin=True,
                alias=BUILTIN_ALIAS,
                trait_paths=paths,
            )
        )
    return out


def resolve_agent(
    data: Any, agent: str, manifest: Manifest | None = None, *, role: str | None = DEFAULT_ROLE
) -> AgentResolution:
    """The tools of one agent of the document in catalog order (python and named-service tools,
    then MCP tools, then the built-ins for ``role``), each with its effective traits and where
    every trait key came from. Raises :class:`UnknownAgentError` for an agent the document does
    not name. Never raises on a wrongly-shaped document: what the runtime would skip is skipped
    (the validator reports it)."""
    return resolve_agent_key(data, _agent_key(data, agent), manifest, role=role)


def resolve_agent_key(
    data: Any, key: Any, manifest: Manifest | None = None, *, role: str | None = DEFAULT_ROLE
) -> AgentResolution:
    """:func:`resolve_agent` for the raw key of the agent mapping (which need not be a string)."""
    return resolve_consumer(data, str(key), manifest, role=role, label=str(key))


def resolve_consumer(
    data: Any,
    agent_id: str,
    manifest: Manifest | None = None,
    *,
    role: str | None = DEFAULT_ROLE,
    label: str | None = None,
) -> AgentResolution:
    """What the runtime offers the agent it runs as ``agent_id`` — any id: one the document does
    not name falls back, as in the runtime, to ``default_agent``, ``main`` or ``default``."""
    loaded = load_agent(data, agent_id, manifest)
    connections: dict[int, Connection] = {}
    base = loaded.tools_path or ()
    for index, raw in loaded.connections:
        connections[index] = read_connection(
            raw, (*base, index), index, manifest, alias=loaded.aliases.get(index)
        )
    indexes = _Indexes.of(connections)
    tools: dict[str, EffectiveTool] = {}
    listing: list[EffectiveTool] = []
    merges: dict[tuple[tuple[str, int], ...], _Merged] = {}
    for offered in loaded.offered:
        tool = tools.get(offered.tool_id)
        if tool is None:
            tool = _configured_tool(
                loaded,
                offered,
                connections.get(offered.connection_index),
                indexes,
                manifest,
                merges,
            )
            tools[offered.tool_id] = tool
        listing.append(tool)
    builtins = _builtin_tools(role, tools)
    by_alias: dict[str, list[ToolEntry]] = {}
    for tool in tools.values():
        by_alias.setdefault(tool.alias, []).append(
            ToolEntry(tool.callable, tool.origin or (), tool.origin_is_key)
        )
    finished = tuple(
        replace(c, tools=tuple(by_alias.get(c.alias or "", ()))) if c.loadable else c
        for c in connections.values()
    )
    return AgentResolution(
        agent=label if label is not None else agent_id,
        tools=(*tools.values(), *builtins),
        connections=finished,
        listing=(*listing, *builtins),
        role=role or "none",
        loaded_from=loaded.agent_key,
        legacy=loaded.legacy,
        loaded=loaded,
    )


def effective_json(resolution: AgentResolution) -> dict[str, Any]:
    """The effective-traits view as JSON-ready data (normalized traits, provenance, eligibility),
    for the role the resolution was made for."""
    tools = {tool.tool_id: effective_tool_json(tool) for tool in resolution.tools}
    return {"agent": resolution.agent, "role": resolution.role, "tools": tools}


def effective_tool_json(tool: EffectiveTool) -> dict[str, Any]:
    """One tool's entry of :func:`effective_json`."""
    entry: dict[str, Any] = {
        "traits": jsonable(tool.normalized_traits),
        "provenance": {str(k): v for k, v in tool.provenance.items()},
        "early": tool.early,
        "execution_design": jsonable(tool.execution_design),
    }
    if tool.namespaces_applicable:
        entry["namespaces_applicable"] = list(tool.namespaces_applicable)
    if tool.namespace_overrides:
        entry["namespace_overrides"] = {
            namespace: jsonable(override)
            for namespace, override in tool.normalized_overrides.items()
        }
    return entry
