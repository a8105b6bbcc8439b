"""The agents page, one agent's page and its manifest (issue 4); its connections are in
``policy.views.connections``.

Every page template has a ``page`` partial: the content of ``<main id="main">``. A full request
gets the whole page; an htmx navigation (a link with ``hx-get``) gets only ``page``; a saved edit
answers with the ``page`` of where the admin lands, retargeted to ``#main`` with the URL pushed.
Without JavaScript the forms post normally and a saved edit redirects (post/redirect/get).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from core.vocabulary import UNKNOWN
from engine.document.diagnostics import Diagnostic
from engine.tools.connections import MCP, NAMED_SERVICE, PYTHON, Connection, mcp_server_id
from engine.tools.resolution import AgentResolution, EffectiveTool
from engine.traits.execution_design import ExecutionDesign
from engine.traits.round_policy import namespace_override
from engine.traits.traits import is_early, normalize_strategy
from policy.audit_notes import agent_added
from policy.domain.edits import add_agent
from policy.domain.placement import Placement, entry_keys, tool_rows
from policy.forms import AgentNameForm, ManifestForm, first_error
from policy.forms_connections import CONNECTION_FORMS
from policy.selectors import (
    DraftState,
    agent_placement,
    agent_resolution,
    agent_summaries,
    draft_state,
    manifest_rows,
    react_only_agents,
)
from policy.services import StaleRevision, manifest_upload
from policy.services import agent_remove as agent_remove_service
from policy.services import agent_rename as agent_rename_service
from policy.suites import suite_check
from policy.views.common import (
    apply_change,
    apply_edit,
    base_revision,
    conflict_context,
    problem,
)
from web.rendering import (
    HtmxHttpRequest,
    is_htmx,
    render_page,
    show_after_edit,
)

AGENTS_TEMPLATE = "policy/agents.html"
AGENT_TEMPLATE = "policy/agent.html"


def agent_entry(state: DraftState, agent: str) -> Any:
    """The agent's mapping in the draft as written, or ``None`` (for the conflict view)."""
    agents = state.data.get("surfaces", {}).get("as_consumer", {}).get("agents", {})
    return agents.get(agent) if isinstance(agents, Mapping) else None


def require_agent(state: DraftState, agent: str) -> None:
    if agent not in state.agents:
        raise Http404(f"The draft has no agent {agent!r}.")


# --- the agents page ------------------------------------------------------------------------


def agents_context(state: DraftState) -> dict[str, Any]:
    from policy.versions import draft_standing

    return {
        "state": state,
        "base_revision": state.revision,
        "agents": agent_summaries(state),
        "react_only": react_only_agents(state),
        "standing": draft_standing(state),
    }


def _show_agents(request: HtmxHttpRequest, state: DraftState) -> HttpResponse:
    return show_after_edit(
        request, AGENTS_TEMPLATE, agents_context(state), reverse("policy:agents")
    )


@require_GET
def agent_list(request: HtmxHttpRequest) -> HttpResponse:
    return render_page(request, AGENTS_TEMPLATE, agents_context(draft_state()))


@require_POST
def agent_add(request: HtmxHttpRequest) -> HttpResponse:
    form = AgentNameForm(request.POST)
    if not form.is_valid():
        return problem(request, first_error(form), status=422)
    name = form.cleaned_data["name"]
    return apply_edit(
        request,
        lambda doc: add_agent(doc, name),
        lambda state: _show_agents(request, state),
        audit=agent_added(name),
        current=lambda state: state.agents,
        what="agents",
    )


@require_POST
def agent_rename(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    require_agent(draft_state(), agent)
    form = AgentNameForm(request.POST)
    if not form.is_valid():
        return problem(request, first_error(form), status=422)
    new_name = form.cleaned_data["name"]
    return apply_change(
        request,
        lambda revision: agent_rename_service(
            agent=agent, new_name=new_name, base_revision=revision, user=request.user
        ),
        lambda state: _show_agents(request, state),
        current=lambda state: agent_entry(state, agent),
        what=f"agent {agent}",
    )


@require_POST
def agent_remove(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    require_agent(draft_state(), agent)
    return apply_change(
        request,
        lambda revision: agent_remove_service(
            agent=agent, base_revision=revision, user=request.user
        ),
        lambda state: _show_agents(request, state),
        current=lambda state: agent_entry(state, agent),
        what=f"agent {agent}",
    )


# --- one agent's page ------------------------------------------------------------------------


@dataclass(frozen=True)
class OverrideView:
    """A named-service namespace that offers the tool, and its override (if any)."""

    namespace: str
    strategy: tuple[str, ...] | None
    early: bool
    url: str | None


@dataclass(frozen=True)
class ToolRowView:
    name: str
    tool_id: str
    url: str | None
    strategy: tuple[str, ...]
    early: bool
    design: ExecutionDesign
    diagnostics: tuple[Diagnostic, ...]
    wildcard: bool = False
    replaced: bool = False
    overrides: tuple[OverrideView, ...] = ()

    @property
    def runs_alone(self) -> bool:
        return self.strategy == (UNKNOWN,)


@dataclass(frozen=True)
class ConnectionView:
    index: int
    kind: str
    known_kind: bool
    alias: str | None
    source: tuple[tuple[str, str], ...]
    problem: str | None
    diagnostics: tuple[Diagnostic, ...]
    rows: tuple[ToolRowView, ...]
    first: bool
    last: bool

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def has_wildcard(self) -> bool:
        return any(row.wildcard for row in self.rows)


@dataclass(frozen=True)
class BuiltinView:
    tool_id: str
    strategy: tuple[str, ...]
    early: bool


def _tool_url(agent: str, index: int, key: str, namespace: str | None = None) -> str | None:
    """The tool editor's URL, or ``None`` for a key no URL can hold (it contains ``/``)."""
    try:
        url = reverse("policy:tool-edit", args=[agent, index, key])
    except NoReverseMatch:
        return None
    if namespace is not None:
        url += "?" + urlencode({"namespace": namespace})
    return url


def _source(connection: Connection) -> tuple[tuple[str, str], ...]:
    raw = connection.raw
    if connection.kind == PYTHON:
        return tuple(
            (key, str(raw[key])) for key in ("module", "ref") if raw.get(key) not in (None, "")
        )
    if connection.kind == MCP:
        server = mcp_server_id(raw)
        return (("server", server),) if server else ()
    if connection.kind == NAMED_SERVICE:
        return tuple(
            (f"namespace {ns.name}", ", ".join(str(op) for op in ns.operations) or "no operations")
            for ns in connection.namespaces
        )
    return ()


def _overrides(
    agent: str, connection: Connection, name: str, tool: EffectiveTool | None
) -> tuple[OverrideView, ...]:
    if connection.kind != NAMED_SERVICE:
        return ()
    out = []
    for namespace in connection.namespaces:
        override = (
            namespace_override(tool.namespace_overrides, {"namespace": namespace.name})
            if tool
            else None
        )
        if name not in namespace.callables and override is None:
            continue
        strategy = normalize_strategy(override.get("strategy")) if override is not None else None
        early = override is not None and is_early(override)
        url = _tool_url(agent, connection.index, name, namespace.name)
        out.append(OverrideView(namespace.name, strategy, early, url))
    return tuple(out)


def _row(
    agent: str,
    connection: Connection,
    name: str,
    resolution: AgentResolution,
    placement: Placement,
) -> ToolRowView:
    key = entry_keys(connection, name)[0]
    diagnostics = placement.for_tool(connection.index, name)
    url = _tool_url(agent, connection.index, key)
    if name == "*":
        entry = connection.traits_raw().get(key)
        traits: Mapping[str, Any] = entry if isinstance(entry, Mapping) else {}
        strategy = normalize_strategy(traits.get("strategy"))
        early = is_early(traits)
        return ToolRowView(
            name=name,
            tool_id=f"mcp.{connection.alias}.*",
            url=url,
            strategy=strategy if "strategy" in traits else (),
            early=early,
            design=ExecutionDesign(),
            diagnostics=diagnostics,
            wildcard=True,
        )
    tool_id = connection.tool_id(name)
    tool = resolution.find(tool_id)
    return ToolRowView(
        name=name,
        tool_id=tool_id,
        url=url,
        strategy=tool.strategy if tool else (UNKNOWN,),
        early=tool.early if tool else False,
        design=tool.design if tool else ExecutionDesign(),
        diagnostics=diagnostics,
        # Two connections giving one id: the runtime keeps the later connection's tool.
        replaced=tool is None or tool.connection_index != connection.index,
        overrides=_overrides(agent, connection, name, tool),
    )


def agent_context(state: DraftState, agent: str, **extra: Any) -> dict[str, Any]:
    """Everything the agent page shows; raises 404 for an agent the draft does not have."""
    resolution = agent_resolution(state, agent)
    placement = agent_placement(state, resolution)
    count = len(resolution.connections)
    connections = [
        ConnectionView(
            index=connection.index,
            kind=connection.kind or str(connection.raw.get("kind")),
            known_kind=connection.kind is not None,
            alias=connection.alias,
            source=_source(connection),
            problem=connection.problem,
            diagnostics=placement.for_connection(connection.index),
            rows=tuple(
                _row(agent, connection, name, resolution, placement)
                for name in tool_rows(connection)
            ),
            first=position == 0,
            last=position == count - 1,
        )
        for position, connection in enumerate(resolution.connections)
    ]
    builtins = [
        BuiltinView(tool.tool_id, tool.strategy, tool.early)
        for tool in resolution.tools
        if tool.builtin
    ]
    row = manifest_rows().get(agent)
    context = {
        "state": state,
        "base_revision": state.revision,
        "agent": agent,
        "agent_diagnostics": placement.agent,
        "connections": connections,
        "builtins": builtins,
        "manifest": row,
        "manifest_tools": len(row.data) if row is not None and isinstance(row.data, dict) else 0,
        "manifest_form": ManifestForm(),
        "kinds": list(CONNECTION_FORMS),
        "suite": suite_check(agent, state),
    }
    context.update(extra)
    return context


def show_agent(
    request: HtmxHttpRequest, state: DraftState, agent: str, *, saved: str | None = None
) -> HttpResponse:
    """The agent page after an edit; ``saved`` names what was saved, for the confirmation."""
    url = reverse("policy:agent", args=[agent])
    context = agent_context(state, agent)
    if saved is not None:
        note = f"Saved {saved}: the draft is now at revision {state.revision} (not published yet)."
        if is_htmx(request):
            context["saved_note"] = note
            context["saved_tool"] = saved
        else:
            messages.success(request, note)
    return show_after_edit(request, AGENT_TEMPLATE, context, url)


@require_GET
def agent_detail(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    return render_page(request, AGENT_TEMPLATE, agent_context(draft_state(), agent))


@require_POST
def manifest_upload_view(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    state = draft_state()
    require_agent(state, agent)
    form = ManifestForm(request.POST, request.FILES)
    if not form.is_valid():
        context = agent_context(state, agent, manifest_form=form)
        if request.htmx:
            return render(request, f"{AGENT_TEMPLATE}#manifest", context, status=422)
        return render(request, AGENT_TEMPLATE, context, status=422)
    data = form.cleaned_data["manifest"]
    revision = base_revision(request)
    if revision is None:
        return problem(request, "The form did not say which draft revision it edits.", status=422)
    try:
        manifest_upload(agent=agent, data=data, user=request.user, base_revision=revision)
    except StaleRevision as exc:
        # Nothing was stored: show the manifest in force beside the one the user sent.
        now = draft_state()
        current = manifest_rows().get(agent)
        conflict = conflict_context(
            exc,
            current=current.data if current is not None else None,
            yours=json.dumps(data, indent=2, ensure_ascii=False),
            what=f"the manifest of {agent}",
        )
        # The form comes back holding the user's manifest (also one sent as a file), based on
        # the current revision: saving again replaces the manifest in force, knowingly.
        again = ManifestForm(initial={"text": conflict["yours"]})
        context = agent_context(now, agent, manifest_form=again, manifest_conflict=conflict)
        template = f"{AGENT_TEMPLATE}#manifest" if request.htmx else AGENT_TEMPLATE
        return render(request, template, context, status=409)
    return show_agent(request, draft_state(), agent)
