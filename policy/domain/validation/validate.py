"""Validation of a policy document's content: every agent, connection and tool (DESIGN §2.9).

What the text itself gets wrong (yaml-syntax, duplicate-key, yaml-too-large, hash-mismatch, and the
refusal of a document without ``surfaces.as_consumer.agents``) is reported by ``yaml_io``; this
module reports where the runtime would read the document differently from what the admin wrote.
It never raises, whatever the structure under ``agents``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from core.gc_pause import gc_paused
from engine.catalog.multi_action import (
    catalog_form,
    inert_mode_keys,
    inert_mode_message,
    multi_action_enabled,
    profile_mode,
)
from engine.document.diagnostics import Diagnostic
from engine.document.paths import AGENTS
from engine.document.source import SourceMap
from engine.tools.connections import (
    KINDS,
    MCP,
    NAMED_SERVICE,
    PYTHON,
    WILDCARD,
    Connection,
)
from engine.tools.loading import trait_candidates
from engine.tools.manifest import Manifest
from engine.tools.resolution import AgentResolution, agents_mapping, resolve_agent_key
from engine.traits.builtins import BUILTIN_ALIAS
from policy.domain.validation.discovered import ServerFacts, check_discovered
from policy.domain.validation.keys import check_design_entries, check_namespaces, check_trait_keys
from policy.domain.validation.report import Reporter, close_match, describe, shape_list
from policy.domain.validation.tools import check_tools, untypeable
from policy.domain.validation.tools_unknown import CODE as TOOLS_UNKNOWN
from policy.domain.validation.tools_unknown import EVERY_TOOL, tools_unknown


@gc_paused()  # thousands of discovered tools: core.gc_pause says why
def validate_policy(
    data: Any,
    source: SourceMap,
    manifest: Manifest | None = None,
    *,
    manifests: Mapping[str, Manifest] | None = None,
    servers: ServerFacts | None = None,
) -> list[Diagnostic]:
    """Every content diagnostic of the document, for every agent, in document order per agent.

    ``manifest`` applies to every agent (the CLI's ``--manifest``); ``manifests`` gives each
    agent its own (the editor stores one per agent) and wins for the agents it names.
    ``servers``: what the operator set per MCP server id (trusted, discovery source).
    """
    reporter = Reporter(source)
    for key, agent in agents_mapping(data).items():
        own = manifests.get(str(key)) if manifests else None
        _check_agent(reporter, data, key, agent, own or manifest, servers)
    _inert_mode_keys(reporter, data)
    for key, connections in legacy_agents(data).items():
        own = manifests.get(str(key)) if manifests else None
        _check_legacy_agent(reporter, data, key, connections, own or manifest)
    return reporter.diagnostics


def _inert_mode_keys(reporter: Reporter, data: Any) -> None:
    agents = [*agents_mapping(data), *legacy_agents(data)]
    for key in inert_mode_keys(data, agents):
        message, hint = inert_mode_message(key)
        reporter.warning("key-inert", tuple(key.split(".")), message, hint, at="key")


def legacy_agents(data: Any) -> Mapping[Any, Any]:
    """The legacy ``tools.agents`` mapping (agent → list of connections), read by the runtime
    when ``surfaces.as_consumer.agents`` has no entry for the agent it runs."""
    tools = data.get("tools") if isinstance(data, Mapping) else None
    agents = tools.get("agents") if isinstance(tools, Mapping) else None
    return agents if isinstance(agents, Mapping) else {}


def _check_legacy_agent(
    reporter: Reporter, data: Any, key: Any, connections: Any, manifest: Manifest | None
) -> None:
    path = ("tools", "agents", key)
    if not isinstance(connections, list):
        reporter.error(
            "shape",
            path,
            f"Legacy agent {key!r} must be a list of connections, not {describe(connections)}; "
            "the runtime loads no configured tool for it.",
            "Write it as a list: each item one connection mapping (kind, alias, allowed, …).",
        )
        return
    resolution = resolve_agent_key(data, key, manifest)
    if resolution.loaded_from != key or not resolution.legacy:
        return  # the runtime reads surfaces.as_consumer.agents for this id: checked there
    _check_loaded(reporter, data, key, resolution, manifest)


def _check_agent(
    reporter: Reporter,
    data: Any,
    key: Any,
    agent: Any,
    manifest: Manifest | None,
    servers: ServerFacts | None = None,
) -> None:
    path = (*AGENTS, key)
    if not isinstance(agent, Mapping):
        reporter.error(
            "shape",
            path,
            f"Agent {key!r} must be a mapping with a tools list, not {describe(agent)}; the "
            "runtime cannot read it.",
            "Write the agent as a mapping: tools: [...].",
        )
        return
    tools = agent.get("tools")
    if tools is not None and not isinstance(tools, list):
        reporter.error(
            "shape",
            (*path, "tools"),
            f"tools of agent {key!r} must be a list of connections, not {describe(tools)}; the "
            "runtime loads no configured tool for this agent.",
            "Write tools as a list: each item one connection mapping (kind, alias, allowed, …).",
        )
    elif isinstance(tools, list):
        for index, item in enumerate(tools):
            if not isinstance(item, Mapping):
                reporter.error(
                    "shape",
                    (*path, "tools", index),
                    f"A connection must be a mapping (kind, alias, allowed, …), not "
                    f"{describe(item)}; the runtime skips it.",
                    "Write the connection as a mapping, e.g. {kind: mcp, server_id: browser}.",
                )
    resolution = resolve_agent_key(data, key, manifest)
    if resolution.loaded_from != key or resolution.legacy:
        # The runtime reads another agent's connections for this id: those are checked there.
        _fallback(reporter, key, resolution)
        return
    _check_loaded(reporter, data, key, resolution, manifest, servers)


def _check_loaded(
    reporter: Reporter,
    data: Any,
    key: Any,
    resolution: AgentResolution,
    manifest: Manifest | None,
    servers: ServerFacts | None = None,
) -> None:
    """The connections and tools the runtime loads for the agent ``key`` (and what discovery
    found of them)."""
    reached = frozenset(
        candidate
        for tool in resolution.tools
        if not tool.builtin
        for candidate in trait_candidates(tool.tool_id, tool.alias, tool.callable)
    )
    for connection in resolution.connections:
        _check_connection(reporter, connection, reached)
    _check_aliases(reporter, resolution.connections)
    check_tools(reporter, resolution)
    check_discovered(reporter, data, resolution, manifest, servers)
    _multi_action_off(reporter, data, key, resolution)
    _catalog_compact(reporter, data, key, resolution)


def _multi_action_off(reporter: Reporter, data: Any, key: Any, resolution: AgentResolution) -> None:
    """Say what multi-action off means for this agent's strategy traits, per react version, as
    recorded from the runtime (conformance families v3off and v2; tests/conformance/
    test_diagnostic_claims.py checks each claim against those recordings)."""
    if not any("strategy" in tool.traits for tool in resolution.tools if not tool.builtin):
        return
    mode = profile_mode(data, str(key))
    if multi_action_enabled(mode):
        return
    why = (
        f"its default instruction profile sets multi_action_mode: {mode!r}"
        if mode is not None
        else "no instruction profile does"
    )
    reporter.info(
        "multi-action-off",
        (*AGENTS, key),
        f"Multi-action mode is off for agent {key!r} unless the deployment turns it on ({why}): "
        "one action per decision. Under v3 the overseer still checks the strategy order: an "
        "action it rejects stops the stream and the first accepted action runs; if it rejects "
        "none, two or more action channels are multiple_channel_instances and nothing of it runs "
        "(an early start already ran); the model is asked again. Under v2 (KDCube's default) "
        "there is no overseer: two or more actions run nothing and the model is asked again (2 "
        "protocol retries per turn).",
        "To let the model emit several calls per decision under v3, set "
        "AI_REACT_AGENT_MULTI_ACTION=on in the runtime or add an instruction profile with "
        f"multi_action_mode: on (react.{key}.instruction_profiles). The glossary's "
        "multi-action mode has the detail; the playground's multi_action_mode and react_version "
        "fields show each case.",
        at="key",
    )


def _catalog_compact(reporter: Reporter, data: Any, key: Any, resolution: AgentResolution) -> None:
    """The model reads the traits only in the full catalog (issue 37 §2): say so when the agent's
    default form is compact, or no catalog at all, and its tools carry traits."""
    if not any(
        "strategy" in tool.traits or "execution" in tool.traits
        for tool in resolution.tools
        if not tool.builtin
    ):
        return
    form = catalog_form(data, str(key))
    if form.include and form.detail == "full":
        return
    if not form.include:
        what, source = "no tool catalog at all", form.include_source
    else:
        what, source = "the compact tool catalog", form.detail_source
    reporter.info(
        "catalog-compact",
        (*AGENTS, key),
        f"The model of agent {key!r} reads {what} by default ({source}), so it reads no "
        "strategy or early-start lines; under v3 the overseer still rejects what the traits "
        "forbid (a model that never read them is rejected more often), and the end user may "
        "pick either form for a conversation.",
        "Set instructions.tool_catalog_detail: full in the agent's react block (or its default "
        "instruction profile) for the model to read the traits; traitdeck effective --format "
        "json shows the form and where it comes from.",
        at="key",
    )


def _fallback(reporter: Reporter, key: Any, resolution: AgentResolution) -> None:
    if resolution.loaded_from is None:
        where = "no agent at all, so it offers only the built-in tools"
    else:
        shape = "tools.agents" if resolution.legacy else "agents"
        where = f"the connections of {shape}.{resolution.loaded_from} instead"
    reporter.warning(
        "agent-fallback",
        (*AGENTS, key),
        f"Agent {key!r} has no tools list, so when the runtime runs it, it reads {where}.",
        "Give the agent a tools list (tools: [] for none).",
        at="key",
    )


def _check_connection(reporter: Reporter, connection: Connection, reached: frozenset[str]) -> None:
    raw, path = connection.raw, connection.path
    if "id" in raw:
        _id_key_ignored(reporter, connection)
    if connection.kind is None:
        kind = raw.get("kind")
        suggestion = close_match(kind, KINDS)
        reporter.error(
            "connection-kind",
            (*path, "kind"),
            f"kind {kind!r} is not python, mcp or named_service: the runtime cannot load this "
            "connection and offers none of its tools.",
            f"Did you mean kind: {suggestion}?"
            if suggestion
            else "Use python, mcp or named_service (no kind means python).",
        )
        return
    alias = raw.get("alias")
    if alias is not None and not (isinstance(alias, str) and alias.strip()):
        reporter.error(
            "shape",
            (*path, "alias"),
            f"alias must be a non-empty string, not {describe(alias)}; the runtime "
            "ignores it and names the tools after name (or the default).",
            "Write alias as a plain name, e.g. alias: workspace_jobs.",
        )
    if connection.kind == NAMED_SERVICE:
        check_namespaces(reporter, connection)
    else:
        _check_listed(reporter, connection)
    if not connection.loadable:
        _unloadable(reporter, connection)
        return
    unknown = tools_unknown(connection)
    if unknown:
        _tools_unknown(reporter, connection)
    check_trait_keys(reporter, connection, reached, tools_unknown=unknown)
    check_design_entries(reporter, connection)


def _tools_unknown(reporter: Reporter, connection: Connection) -> None:
    raw, alias = connection.raw, connection.alias or ""
    traits = raw.get("tool_traits")
    keys = [str(k) for k in traits] if isinstance(traits, Mapping) else []
    where: tuple[Any, ...] = connection.path
    at: Literal["key", "first_key"] = "first_key"
    if WILDCARD in keys:
        where, at = (*connection.path, "tool_traits", WILDCARD), "key"
    elif "allowed" in raw:
        where, at = (*connection.path, "allowed"), "key"
    server = "server" if connection.kind == MCP else "module"
    applies = f" Its tool_traits ({', '.join(keys)}) apply" if keys else " Its tools are offered"
    reporter.info(
        TOOLS_UNKNOWN,
        where,
        f"{alias} offers {EVERY_TOOL.replace('server', server)} at run time, and Traitdeck has "
        f"not seen them.{applies} as the runtime finds them; Traitdeck cannot check the names.",
        "Upload the manifest or discover the tools, so Traitdeck can list them and check "
        "their traits.",
        at=at,
    )


def _id_key_ignored(reporter: Reporter, connection: Connection) -> None:
    raw = connection.raw
    if connection.alias is not None and connection.alias_path is not None:
        named = f"its tools are named after {connection.alias_path[-1]} {connection.alias!r}"
    elif connection.alias is not None:
        named = f"its tools are named after the default alias {connection.alias!r}"
    else:
        named = "it has no alias or name, so the runtime skips it"
    if connection.alias_path is not None and connection.alias_path[-1] == "alias":
        hint = "Remove id: alias already names this connection."
    else:
        hint = f"Rename id to alias if {raw['id']!r} should name the tools."
    reporter.warning(
        "id-key-ignored",
        (*connection.path, "id"),
        f"The runtime does not read id ({raw['id']!r}) on a connection: {named}.",
        hint,
        at="key",
    )


def _unloadable(reporter: Reporter, connection: Connection) -> None:
    raw = connection.raw
    if connection.kind == PYTHON and "module or ref" in (connection.problem or ""):
        # Not an error: a bundle's own code (a LangGraph agent, say) may read the connection.
        reporter.warning(
            "connection-unloadable",
            connection.path,
            "The ReAct loader skips this python connection: it has neither module nor ref, so "
            "it offers none of its tools to a ReAct agent. The bundle's own code may read it.",
            "Add ref: path/to/tools.py or module: package.module if a ReAct agent should use "
            "these tools; leave it as it is if the bundle's own code binds them.",
            at="first_key",
        )
        return
    if connection.kind == PYTHON:
        message = "it has no alias or name, so its tools would have no id prefix"
        hint = "Add alias: <name>; the model sees <alias>.<callable>."
        if "id" in raw:
            hint = "Rename id to alias: the runtime reads alias (or name), never id."
    elif connection.kind == MCP:
        message = "it has no server_id, server or name, so the runtime has no server to reach"
        hint = "Add server_id: <the MCP server's id>."
    else:
        message = "no namespace allows an operation that maps to an offered callable"
        hint = "List operations such as object.search under namespaces.<namespace>.allowed."
        if "allowed" in raw:
            hint = "Move allowed under namespaces.<namespace>: a named service reads it there."
    reporter.error(
        "connection-unloadable",
        connection.path,
        f"The runtime skips this {connection.kind} connection: {message}. None of its tools "
        "is offered.",
        hint,
        at="first_key",
    )


def _check_listed(reporter: Reporter, connection: Connection) -> None:
    for key in ("allowed", "tools") if connection.kind == MCP else ("allowed",):
        shape_list(reporter, connection.raw, connection.path, key)


def _check_aliases(reporter: Reporter, connections: tuple[Connection, ...]) -> None:
    seen: dict[str, int | None] = {}
    for connection in connections:
        if not connection.loadable or connection.alias is None:
            continue
        alias = connection.alias
        clashes_builtin = alias == BUILTIN_ALIAS and connection.kind != MCP
        if alias in seen or clashes_builtin:
            place = connection.alias_path or connection.path
            if clashes_builtin:
                message = (
                    f"Alias {alias!r} is the runtime's own read-only connection (react.read, "
                    "react.delegate, …): this connection's tool ids clash with the built-in ones."
                )
            else:
                message = (
                    f"Alias {alias!r} is already used by tools[{seen[alias]}]: the runtime merges "
                    "their allowed lists, a later trait entry for the same tool replaces the "
                    "earlier one whole, and a tool both load is listed twice in the catalog."
                )
            reporter.warning(
                "alias-duplicate",
                place,
                message,
                "Give each connection its own alias.",
                at="key" if connection.alias_path else "first_key",
            )
        seen.setdefault(alias, connection.index)
        if untypeable(alias):
            reporter.warning(
                "alias-untypeable",
                connection.alias_path or connection.path,
                f"Alias {alias!r} has characters a model cannot reliably type (only letters, "
                "digits, _, - and . are safe): every tool id of this connection starts with it, "
                "and a call that misspells one is rejected as an unknown tool.",
                "Rename the alias to letters, digits, _, - and . only.",
                at="value" if connection.alias_path else "first_key",
            )
