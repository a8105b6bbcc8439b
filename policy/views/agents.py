"""The agents page, one agent's page, its connections and its manifest (issue 4).

Every page template has a ``page`` partial: the content of ``<main id="main">``. A full request
gets the whole page; an htmx navigation (a link with ``hx-get``) gets only ``page``; a saved edit
answers with the ``page`` of where the admin lands, retargeted to ``#main`` with the URL pushed.
Without JavaScript the forms post normally and a saved edit redirects (post/redirect/get).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import push_url, reswap, retarget
from django_htmx.middleware import HtmxDetails

from policy.domain.connections import MCP, NAMED_SERVICE, PYTHON, Connection, mcp_server_id
from policy.domain.diagnostics import Diagnostic
from policy.domain.edits import (
    add_agent,
    add_connection,
    connection_count,
    move_connection,
    remove_connection,
    set_namespaces,
    update_connection,
)
from policy.domain.execution_design import ExecutionDesign
from policy.domain.placement import Placement, entry_keys, tool_rows
from policy.domain.resolution import AgentResolution, EffectiveTool, UnknownAgentError
from policy.domain.traits import (
    UNKNOWN,
    is_early_profile,
    is_exactly_neutral,
    normalize_strategy,
)
from policy.forms import (
    CONNECTION_FORMS,
    AgentNameForm,
    ConnectionForm,
    ManifestForm,
    NamedServiceConnectionForm,
    first_error,
)
from policy.selectors import (
    DraftState,
    agent_placement,
    agent_resolution,
    agent_summaries,
    draft_state,
    manifest_rows,
)
from policy.services import agent_remove as agent_remove_service
from policy.services import agent_rename as agent_rename_service
from policy.services import manifest_upload
from policy.views.common import Edit, apply_change, apply_edit, problem


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (typed for mypy)."""

    htmx: HtmxDetails


AGENTS_TEMPLATE = "policy/agents.html"
AGENT_TEMPLATE = "policy/agent.html"
CONNECTION_TEMPLATE = "policy/connection_form.html"


# --- page rendering -----------------------------------------------------------------------------


def htmx_details(request: HttpRequest) -> HtmxDetails | None:
    """django-htmx's view of an htmx request, or ``None`` (works on a plain ``HttpRequest``)."""
    details = getattr(request, "htmx", None)
    return details if isinstance(details, HtmxDetails) and details else None


def is_htmx(request: HttpRequest) -> bool:
    return htmx_details(request) is not None


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """The whole page, or (htmx navigation) only its ``page`` partial for ``#main``."""
    # A history restore (back button after the cache is gone) needs the whole page.
    details = htmx_details(request)
    partial = details is not None and not details.history_restore_request
    response = render(request, f"{template}#page" if partial else template, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def show_after_edit(
    request: HttpRequest, template: str, context: dict[str, Any], url: str
) -> HttpResponse:
    """Where a saved edit lands: htmx swaps that page into ``#main``; without JS, a redirect."""
    if not is_htmx(request):
        return redirect(url)
    response = render(request, f"{template}#page", context)
    return push_url(reswap(retarget(response, "#main"), "innerHTML"), url)


def _require_agent(state: DraftState, agent: str) -> None:
    if agent not in state.agents:
        raise Http404(f"The draft has no agent {agent!r}.")


# --- the agents page ------------------------------------------------------------------------


def agents_context(state: DraftState) -> dict[str, Any]:
    return {"state": state, "base_revision": state.revision, "agents": agent_summaries(state)}


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
    )


@require_POST
def agent_rename(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    _require_agent(draft_state(), agent)
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
    )


@require_POST
def agent_remove(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    _require_agent(draft_state(), agent)
    return apply_change(
        request,
        lambda revision: agent_remove_service(
            agent=agent, base_revision=revision, user=request.user
        ),
        lambda state: _show_agents(request, state),
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
        override = tool.namespace_overrides.get(namespace.name) if tool else None
        if name not in namespace.callables and override is None:
            continue
        strategy = normalize_strategy(override.get("strategy")) if override is not None else None
        early = (
            override is not None
            and strategy is not None
            and is_exactly_neutral(strategy)
            and is_early_profile(override.get("execution"))
        )
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
        early = is_exactly_neutral(strategy) and is_early_profile(traits.get("execution"))
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
    try:
        resolution = agent_resolution(state, agent)
    except UnknownAgentError:
        raise Http404(f"The draft has no agent {agent!r}.") from None
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
    }
    context.update(extra)
    return context


def show_agent(request: HtmxHttpRequest, state: DraftState, agent: str) -> HttpResponse:
    url = reverse("policy:agent", args=[agent])
    return show_after_edit(request, AGENT_TEMPLATE, agent_context(state, agent), url)


@require_GET
def agent_detail(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    return render_page(request, AGENT_TEMPLATE, agent_context(draft_state(), agent))


@require_POST
def manifest_upload_view(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    state = draft_state()
    _require_agent(state, agent)
    form = ManifestForm(request.POST, request.FILES)
    if not form.is_valid():
        context = agent_context(state, agent, manifest_form=form)
        if request.htmx:
            return render(request, f"{AGENT_TEMPLATE}#manifest", context, status=422)
        return render(request, AGENT_TEMPLATE, context, status=422)
    manifest_upload(agent=agent, data=form.cleaned_data["manifest"], user=request.user)
    return show_agent(request, draft_state(), agent)


# --- connections ---------------------------------------------------------------------------


def _connection(state: DraftState, agent: str, index: int) -> Connection:
    try:
        resolution = agent_resolution(state, agent)
    except UnknownAgentError:
        raise Http404(f"The draft has no agent {agent!r}.") from None
    connection = resolution.connection(index)
    if connection is not None:
        return connection
    raise Http404(f"Agent {agent!r} has no connection #{index + 1}.")


def _connection_page(
    state: DraftState, agent: str, form: ConnectionForm | None, **extra: Any
) -> dict[str, Any]:
    return {
        "state": state,
        "base_revision": state.revision,
        "agent": agent,
        "agent_url": reverse("policy:agent", args=[agent]),
        "form": form,
        "kind": form.kind if form is not None else extra.get("kind", ""),
        **extra,
    }


def _invalid_connection(request: HtmxHttpRequest, context: dict[str, Any]) -> HttpResponse:
    template = f"{CONNECTION_TEMPLATE}#connection-editor" if request.htmx else CONNECTION_TEMPLATE
    return render(request, template, context, status=422)


def _with_namespaces(edit: Edit, form: ConnectionForm, agent: str, index: int | None) -> Edit:
    """Follow the connection edit with the namespace rows of a named-service form."""
    if not isinstance(form, NamedServiceConnectionForm):
        return edit
    rows = form.namespaces()

    def combined(doc: dict[str, Any]) -> dict[str, Any]:
        new = edit(doc)
        target = connection_count(new, agent) - 1 if index is None else index
        return set_namespaces(new, agent, target, rows)

    return combined


@require_http_methods(["GET", "POST"])
def connection_add(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    state = draft_state()
    _require_agent(state, agent)
    kind = request.POST.get("kind") or request.GET.get("kind") or PYTHON
    form_class = CONNECTION_FORMS.get(kind)
    if form_class is None:
        raise Http404(f"There is no connection kind {kind!r}.")
    if request.method == "GET":
        context = _connection_page(state, agent, form_class(), adding=True)
        return render_page(request, CONNECTION_TEMPLATE, context)
    form = form_class(request.POST)
    if not form.is_valid():
        return _invalid_connection(request, _connection_page(state, agent, form, adding=True))
    fields = form.fields_to_write()
    edit = _with_namespaces(lambda doc: add_connection(doc, agent, fields), form, agent, None)
    return apply_edit(request, edit, lambda new_state: show_agent(request, new_state, agent))


@require_http_methods(["GET", "POST"])
def connection_edit(request: HtmxHttpRequest, agent: str, index: int) -> HttpResponse:
    state = draft_state()
    connection = _connection(state, agent, index)
    form_class = CONNECTION_FORMS.get(connection.kind or "")
    if form_class is None:
        # No kind-specific form fits a kind the runtime does not understand: say so.
        context = _connection_page(
            state, agent, None, index=index, kind=str(connection.raw.get("kind"))
        )
        status = 422 if request.method == "POST" else 200
        return render_page(request, CONNECTION_TEMPLATE, context, status=status)
    if request.method == "GET":
        form = form_class(existing=connection.raw)
        context = _connection_page(state, agent, form, index=index)
        return render_page(request, CONNECTION_TEMPLATE, context)
    form = form_class(request.POST, existing=connection.raw)
    if not form.is_valid():
        return _invalid_connection(request, _connection_page(state, agent, form, index=index))
    fields = form.fields_to_write()
    edit = _with_namespaces(
        lambda doc: update_connection(doc, agent, index, fields), form, agent, index
    )
    return apply_edit(request, edit, lambda new_state: show_agent(request, new_state, agent))


@require_POST
def connection_remove(request: HtmxHttpRequest, agent: str, index: int) -> HttpResponse:
    _connection(draft_state(), agent, index)
    return apply_edit(
        request,
        lambda doc: remove_connection(doc, agent, index),
        lambda state: show_agent(request, state, agent),
    )


@require_POST
def connection_move(request: HtmxHttpRequest, agent: str, index: int) -> HttpResponse:
    _connection(draft_state(), agent, index)
    direction = request.POST.get("direction")
    if direction not in ("up", "down"):
        return problem(request, "Say whether to move the connection up or down.", status=422)
    to = index - 1 if direction == "up" else index + 1
    return apply_edit(
        request,
        lambda doc: move_connection(doc, agent, index, to),
        lambda state: show_agent(request, state, agent),
    )
