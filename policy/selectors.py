"""Read side of the policy app: the draft as the domain sees it, and what Traitdeck says of it."""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.urls import NoReverseMatch, reverse

from engine.catalog.multi_action import (
    ModeSources,
    kdcube_roster,
    multi_action_mode,
    profile_mode,
)
from engine.round.dryrun import RoundSpec
from engine.round.react_version import VersionSources, react_version
from engine.tools.agent_run import AgentRun, agent_run
from engine.tools.loading import select_connections
from engine.tools.manifest import Manifest, parse_manifest
from engine.tools.resolution import (
    AgentResolution,
    UnknownAgentError,
    agent_names,
    resolve_agent,
)
from engine.traits.builtins import DEFAULT_ROLE, ROLES
from policy.domain.analysis import Analysis, analyze_loaded, analyze_text
from policy.domain.placement import Placement, place
from policy.domain.validation.discovered import ServerFacts
from policy.domain.yaml_io import (
    CLI_MAX_BYTES,
    LoadedPolicy,
    empty_policy,
    export_text,
    load_policy,
)
from policy.models import AgentManifest, McpServerSetting, PolicyDraft


@dataclass(frozen=True)
class DraftState:
    """The draft document, its revision and its exported text (what `export.yaml` serves)."""

    data: dict[str, Any]
    revision: int
    text: str

    @property
    def agents(self) -> list[str]:
        return agent_names(self.data)


# Parsing YAML is the slow part of every page; a body never changes once stored, so each is
# parsed once per process: the service that stores one hands over its own reading of it
# (``remember_draft``), and the pages that follow (the draft, its analysis) parse nothing again.
_KEPT = 8
_bodies: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
_readings: OrderedDict[str, LoadedPolicy] = OrderedDict()
_cache_lock = threading.Lock()


def _kept[V](cache: OrderedDict[str, V], key: str, make: Callable[[], V]) -> V:
    with _cache_lock:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = make()  # outside the lock: two threads may both parse, neither waits on the other
    _keep(cache, key, value)
    return value


def _keep[V](cache: OrderedDict[str, V], key: str, value: V) -> None:
    with _cache_lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _KEPT:
            cache.popitem(last=False)


def _read_body(body: str) -> tuple[str, dict[str, Any]]:
    loaded = load_policy(body, max_bytes=CLI_MAX_BYTES)
    data = loaded.data if not loaded.refused else empty_policy()
    return export_text(data), data


def _load_body(body: str) -> tuple[str, dict[str, Any]]:
    """The export text and document of a stored body (shared: copy before changing it)."""
    return _kept(_bodies, body, lambda: _read_body(body))


def _reading(text: str) -> LoadedPolicy:
    """The export text of the draft, loaded (with its source map, for the diagnostics)."""
    return _kept(_readings, text, lambda: load_policy(text, max_bytes=CLI_MAX_BYTES))


def remember_draft(body: str, text: str, loaded: LoadedPolicy) -> None:
    """The draft service stored ``body`` after reading back its export ``text`` as ``loaded``
    (not refused): keep that reading for the body and for its analysis."""
    _keep(_bodies, body, (text, loaded.data))
    _keep(_readings, text, loaded)


def draft_state() -> DraftState:
    draft = PolicyDraft.objects.filter(pk=PolicyDraft.SINGLETON_ID).first()
    if draft is None:
        data = empty_policy()
        return DraftState(data=data, revision=0, text=export_text(data))
    text, data = _load_body(draft.body)
    # Each caller gets its own copy: edits must never mutate the cached document.
    return DraftState(data=copy.deepcopy(data), revision=draft.revision, text=text)


def draft_agent_names() -> list[str]:
    """The draft's agent names, read from the cached document without copying it: ingest asks
    on every POST, and a deep copy of the whole policy there is pure waste."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('body')} FROM {quote(PolicyDraft._meta.db_table)}"
            f" WHERE {quote('id')} = %s",
            [PolicyDraft.SINGLETON_ID],
        )
        row = cursor.fetchone()
    if row is None:
        return []
    return agent_names(_load_body(row[0])[1])


def manifests() -> dict[str, Manifest]:
    return {m.agent: parse_manifest(m.data) for m in AgentManifest.objects.all()}


def manifest_for(agent: str) -> Manifest | None:
    row = AgentManifest.objects.filter(agent=agent).first()
    return parse_manifest(row.data) if row else None


def manifest_rows() -> dict[str, AgentManifest]:
    return {m.agent: m for m in AgentManifest.objects.all()}


@lru_cache(maxsize=32)
def _analysis(text: str, manifests_json: str, servers: ServerFacts) -> Analysis:
    per_agent = {agent: parse_manifest(data) for agent, data in json.loads(manifests_json).items()}
    return analyze_loaded(_reading(text), manifests=per_agent, servers=servers)


def server_facts() -> ServerFacts:
    """What the operator set per MCP server id (trusted, a discovery source), for diagnostics."""
    rows = McpServerSetting.objects.values_list(
        "server_id", "trusted", "source_url", "source_command"
    )
    facts = list(rows)
    return ServerFacts(
        trusted=frozenset(server for server, trusted, _, _ in facts if trusted),
        sourced=frozenset(server for server, _, url, command in facts if url or command),
    )


def _manifests_json() -> str:
    rows = AgentManifest.objects.order_by("agent").values_list("agent", "data")
    # Not sort_keys: a manifest's key order is its tools' order (the analysis reads it back).
    return json.dumps(dict(rows))


def draft_analysis(state: DraftState | None = None) -> Analysis:
    """Diagnostics of the draft; line numbers are those of the exported file."""
    state = state or draft_state()
    return _analysis(state.text, _manifests_json(), server_facts())


def text_analysis(text: str | bytes, *, max_bytes: int, bundle: str | None = None) -> Analysis:
    """Diagnostics of text that is not (yet) the draft: validate and import previews. The text
    may be a KDCube bundles descriptor (``bundle`` names its bundle; raises
    ``DescriptorError`` when none can be chosen)."""
    per_agent = manifests()
    return analyze_text(
        text, manifests=per_agent, servers=server_facts(), max_bytes=max_bytes, bundle=bundle
    )


class AgentNotFound(UnknownAgentError):
    """The policy of a side (the draft, a version) has no agent of that name. Views and API
    handlers let it through: ``config.error_pages`` (pages) and ``config.api`` (the API) map it
    to 404 with this message, once."""

    def __init__(self, agent: str, *, where: str = "The draft") -> None:
        super().__init__(agent)
        self.agent = agent
        self.message = f"{where} has no agent {agent!r}."

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class AgentPolicy:
    """What an agent runs with under one policy document: its resolution (effective tools,
    connections) and where its rounds get their multi-action mode when a round does not say."""

    resolution: AgentResolution
    mode: ModeSources


def agent_policy(
    data: Any, agent: str, *, where: str = "The draft", role: str | None = DEFAULT_ROLE
) -> AgentPolicy:
    """The one selector of "the policy and mode of agent A" in a policy document (the draft's, a
    version's, the one in force): raises :class:`AgentNotFound` naming ``where``. ``role``
    picks the built-ins (parent: react.delegate, child: react.contribute, None: neither)."""
    try:
        resolution = resolve_agent(data, agent, manifest_for(agent), role=role)
    except UnknownAgentError:
        raise AgentNotFound(agent, where=where) from None
    return AgentPolicy(resolution, agent_default_mode(data, agent))


def agent_resolution(
    state: DraftState, agent: str, *, role: str | None = DEFAULT_ROLE
) -> AgentResolution:
    """The agent's resolution in the draft; raises :class:`AgentNotFound` (a 404 for pages and
    the API) when the draft has no such agent."""
    try:
        return resolve_agent(state.data, agent, manifest_for(agent), role=role)
    except UnknownAgentError:
        raise AgentNotFound(agent) from None


def agent_prediction(state: DraftState, agent: str, *, role: str | None = DEFAULT_ROLE) -> AgentRun:
    """The agent as the runtime runs it, for predictions (effective, catalog, dry-run, the
    playground): an id the draft does not name falls back as in the runtime, never 404."""
    return policy_agent_run(state.data, agent, role=role)


def policy_agent_run(
    data: Any,
    agent: str,
    *,
    role: str | None = DEFAULT_ROLE,
    manifest_of: Callable[[str], Manifest | None] | None = None,
) -> AgentRun:
    """:func:`agent_prediction` for any policy document (a version's, an impact side's, a
    suite's), with the manifest of the agent whose tools the runtime reads: ``manifest_of``
    (a version's own manifests), else the stored one."""
    run = agent_run(data, agent, None, role=role)
    # The tools are the resolved agent's, and so is the manifest of what its code offers.
    manifest = (manifest_of or manifest_for)(run.resolved_agent or agent)
    return run if manifest is None else agent_run(data, agent, manifest, role=role)


def role_param(raw: str | None) -> str | None:
    """The ``?role=`` of the effective and catalog views: parent (default), child or none."""
    if raw == "none":
        return None
    return raw if raw in ROLES else DEFAULT_ROLE


def agent_placement(state: DraftState, resolution: AgentResolution) -> Placement:
    """The draft's diagnostics about one agent, each on its tool row, connection or the agent
    (what the agent page, the tool editor and the API show)."""
    return place(
        draft_analysis(state).diagnostics,
        resolution.agent,
        resolution.connections,
        manifest_for(resolution.agent),
    )


def agent_url(agent: str) -> str | None:
    """The agent page's URL, or ``None`` for a name no URL can hold (``/``, empty)."""
    try:
        return reverse("policy:agent", args=[agent])
    except NoReverseMatch:
        return None


@dataclass(frozen=True)
class AgentSummary:
    """One line of the agents page (and of ``GET /api/v1/agents``)."""

    name: str
    url: str | None
    connections: int
    tools: int
    errors: int
    warnings: int


@dataclass(frozen=True)
class ReactOnlyAgent:
    """An agent KDCube's widget lists because the react config names it (``react.agents.<name>``
    or ``react.<name>``) while ``surfaces.as_consumer.agents`` has no entry for it: read-only
    here; the runtime runs it with the tools of ``runs_with`` (None: the built-ins only)."""

    name: str
    where: str
    runs_with: str | None


def react_only_agents(state: DraftState) -> list[ReactOnlyAgent]:
    """The roster's agents named only in ``react`` (issue 37 §4), in the widget's slot order;
    the widget's ``default_agent`` fallback slot is not one."""
    known = {str(name) for name in state.agents}
    out: list[ReactOnlyAgent] = []
    for entry in kdcube_roster(state.data):
        if entry.react_container is None or entry.fallback or entry.name in known:
            continue
        name = entry.name
        key = select_connections(state.data, name)[0]
        where = f"react.agents.{name}" if entry.react_container == "agents" else f"react.{name}"
        out.append(ReactOnlyAgent(name, where, None if key is None else str(key)))
    return out


def agent_summaries(state: DraftState) -> list[AgentSummary]:
    """Every agent of the draft with its connection and tool counts and its problems."""
    diagnostics = draft_analysis(state).diagnostics
    discovered = manifests()
    rows = []
    for name in state.agents:
        manifest = discovered.get(name)
        resolution = resolve_agent(state.data, name, manifest)
        # Counted from the same placement as the agent page, so the two pages agree.
        counts = place(diagnostics, name, resolution.connections, manifest).counts()
        rows.append(
            AgentSummary(
                name=name,
                url=agent_url(name),
                connections=len(resolution.connections),
                tools=sum(1 for tool in resolution.tools if not tool.builtin),
                errors=counts.errors,
                warnings=counts.warnings,
            )
        )
    return rows


def agent_default_mode(data: Any, agent: str) -> ModeSources:
    """Where an agent's rounds get their multi-action mode when a round does not say: its default
    instruction profile, the ``TRAITDECK_MULTI_ACTION_MODE`` setting (DESIGN §2.10 item 6; the
    order is :func:`~engine.catalog.multi_action.multi_action_mode`'s). Suites, impact and drift
    use it; the dry-run adds the request's mode and a picked profile."""
    return ModeSources(None, profile_mode(data, agent, None), settings.TRAITDECK_MULTI_ACTION_MODE)


def dry_run_version(spec: RoundSpec, explicit: str | None) -> tuple[str, str]:
    """The react agent a web dry-run assumes and where that came from: the round's own
    ``react_version``, the request's, the ``TRAITDECK_REACT_AGENT_VERSION`` setting (the order is
    :func:`~engine.round.react_version.react_version`'s)."""
    return react_version(
        VersionSources(spec.react_version, explicit, setting=settings.TRAITDECK_REACT_AGENT_VERSION)
    )


def dry_run_mode(
    state: DraftState, agent: str, spec: RoundSpec, *, mode: str | None, profile: str | None
) -> str:
    """The multi-action mode a dry-run uses: the round's own, the request's, the instruction
    profile's (picked or default), then the ``TRAITDECK_MULTI_ACTION_MODE`` setting."""
    return multi_action_mode(
        spec.multi_action_mode,
        ModeSources(
            mode, profile_mode(state.data, agent, profile), settings.TRAITDECK_MULTI_ACTION_MODE
        ),
    )


def beyond_first_page(agent: str) -> list[str]:
    """Tool ids discovered past their server's first page (the runtime never sees them)."""
    manifest = manifest_for(agent)
    if manifest is None:
        return []
    return [
        tool_id
        for tool_id in manifest.entries
        if manifest.source_for(tool_id).get("kind") == "mcp"
        and isinstance(manifest.source_for(tool_id).get("page"), int)
        and manifest.source_for(tool_id)["page"] > 1
    ]
