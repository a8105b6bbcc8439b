"""Effective traits of an agent's tools, with provenance (DESIGN §2.6).

Three layers, lowest first: ``builtin`` (the ``react.*`` tools), ``manifest`` (what the runtime
discovered in code), ``config`` (the YAML). Per top-level trait key the later layer wins; a key is
replaced whole, never merged, and keeps the position where it was first inserted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from policy.domain.builtins import BUILTIN_ALIAS, BUILTIN_TOOLS, builtin_tool, builtin_traits
from policy.domain.connections import Connection, ToolEntry, mapping_or_empty, read_connection
from policy.domain.execution_design import ExecutionDesign, parse_design
from policy.domain.jsonable import jsonable
from policy.domain.manifest import Manifest
from policy.domain.paths import AGENTS, Path, format_path
from policy.domain.traits import is_early_profile, is_exactly_neutral, normalize_traits
from policy.domain.traits import resolved_strategy as _resolved_strategy

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

    @property
    def strategy(self) -> tuple[str, ...]:
        """The normalized strategy of the default trait mapping (unknown when absent)."""
        return _resolved_strategy(self.traits)

    @property
    def early(self) -> bool:
        """Static early eligibility: exactly neutral with the complete early profile."""
        return is_exactly_neutral(self.strategy) and is_early_profile(self.traits.get("execution"))

    @property
    def design(self) -> ExecutionDesign:
        """The usable part of the tool's execution design (Traitdeck's extension, §2.8)."""
        return parse_design(self.execution_design)[0]

    def traits_for(self, params: Any) -> Mapping[str, Any]:
        """The trait mapping for one call: a namespace override replaces the whole mapping when
        ``params.namespace`` names a namespace that has one for this tool."""
        if isinstance(params, Mapping) and self.namespace_overrides:
            namespace = params.get("namespace")
            if isinstance(namespace, str) and namespace in self.namespace_overrides:
                return self.namespace_overrides[namespace]
        return self.traits


@dataclass(frozen=True)
class AgentResolution:
    agent: str
    tools: tuple[EffectiveTool, ...]
    connections: tuple[Connection, ...] = ()

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


def agent_connections(data: Any, agent_key: Any, manifest: Manifest | None) -> list[Connection]:
    """The connection mappings of one agent as the runtime reads them, in order."""
    agent = agents_mapping(data).get(agent_key)
    if not isinstance(agent, Mapping):
        return []
    tools = agent.get("tools")
    if not isinstance(tools, list):
        return []
    path = (*AGENTS, agent_key, "tools")
    return [
        read_connection(raw, (*path, index), index, manifest)
        for index, raw in enumerate(tools)
        if isinstance(raw, Mapping)
    ]


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
        for key, value in layer.items():
            self.traits[key] = value
            self.provenance[key] = label
            self.paths[key] = path


def _base_layers(merge: _Merge, tool_id: str, manifest: Manifest | None) -> None:
    builtin = builtin_tool(tool_id)
    if builtin is not None:
        # A copy: a caller changing a resolution must not change the runtime's constants.
        merge.apply(builtin_traits(tool_id) or {}, builtin.provenance, ())
    discovered = manifest.traits_for(tool_id) if manifest is not None else None
    if discovered is not None:
        merge.apply(
            discovered, Manifest.provenance(tool_id), (MANIFEST_ROOT, tool_id, "tool_traits")
        )


def _configured_tool(
    connection: Connection, entry: ToolEntry, manifest: Manifest | None
) -> EffectiveTool:
    assert connection.kind is not None
    assert connection.alias is not None
    tool_id = connection.tool_id(entry.callable)
    merge = _Merge()
    _base_layers(merge, tool_id, manifest)
    for path, layer in connection.config_layers(entry.callable):
        merge.apply(layer, f"config {format_path(path)}", path)
    overrides: dict[str, Mapping[str, Any]] = {}
    override_paths: dict[str, Path] = {}
    for namespace in connection.namespaces:
        override = namespace.overrides.get(entry.callable)
        # Applied whenever params.namespace matches, whether or not the namespace allows the
        # operation (the validator flags that case).
        if override is not None:
            overrides[namespace.name] = override
            override_paths[namespace.name] = (*namespace.path, "tool_traits", entry.callable)
    design = connection.design_entry(entry.callable)
    traits, provenance, paths = merge.frozen()
    return EffectiveTool(
        tool_id=tool_id,
        connection_index=connection.index,
        callable=entry.callable,
        kind=connection.kind,
        traits=traits,
        provenance=provenance,
        namespace_overrides=MappingProxyType(overrides),
        execution_design=mapping_or_empty(design[1]) if design else {},
        builtin=False,
        alias=connection.alias,
        origin=entry.origin,
        origin_is_key=entry.origin_is_key,
        trait_paths=paths,
        namespace_override_paths=MappingProxyType(override_paths),
        design_path=design[0] if design else None,
    )


def _builtin_tools(manifest: Manifest | None, taken: Mapping[str, Any]) -> list[EffectiveTool]:
    out = []
    for builtin in BUILTIN_TOOLS:
        if builtin.tool_id in taken:
            continue
        merge = _Merge()
        _base_layers(merge, builtin.tool_id, manifest)
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


def resolve_agent(data: Any, agent: str, manifest: Manifest | None = None) -> AgentResolution:
    """The tools of one agent in catalog order (configured tools, then the built-ins), each with
    its effective traits and where every trait key came from. Never raises on a wrongly-shaped
    document: what the runtime would skip is skipped (the validator reports it)."""
    return resolve_agent_key(data, _agent_key(data, agent), manifest)


def resolve_agent_key(data: Any, key: Any, manifest: Manifest | None = None) -> AgentResolution:
    """:func:`resolve_agent` for the raw key of the agent mapping (which need not be a string)."""
    connections = agent_connections(data, key, manifest)
    tools: dict[str, EffectiveTool] = {}
    for connection in connections:
        if not connection.loadable:
            continue
        for entry in connection.tools:
            tool = _configured_tool(connection, entry, manifest)
            # Two connections claiming one id: the runtime keys tools by id, so the later
            # connection's tool replaces the earlier one (and keeps its place) — alias-duplicate.
            tools[tool.tool_id] = tool
    resolved = [*tools.values(), *_builtin_tools(manifest, tools)]
    return AgentResolution(agent=str(key), tools=tuple(resolved), connections=tuple(connections))


def effective_json(resolution: AgentResolution) -> dict[str, Any]:
    """The effective-traits view as JSON-ready data (normalized traits, provenance, eligibility)."""
    tools = {tool.tool_id: effective_tool_json(tool) for tool in resolution.tools}
    return {"agent": resolution.agent, "tools": tools}


def effective_tool_json(tool: EffectiveTool) -> dict[str, Any]:
    """One tool's entry of :func:`effective_json`."""
    entry: dict[str, Any] = {
        "traits": jsonable(normalize_traits(tool.traits)),
        "provenance": {str(k): v for k, v in tool.provenance.items()},
        "early": tool.early,
        "execution_design": jsonable(tool.execution_design),
    }
    if tool.namespace_overrides:
        entry["namespace_overrides"] = {
            namespace: jsonable(normalize_traits(override))
            for namespace, override in tool.namespace_overrides.items()
        }
    return entry
