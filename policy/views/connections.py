"""One agent's connections: adding one (of a kind), editing, removing and moving it (issue 4).

The editor is ``policy/connection_form.html``; a saved edit lands on the agent's page as
``policy.views.agents`` renders it (htmx swaps it into ``#main``; without JS, a redirect).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from engine.tools.connections import PYTHON, Connection
from policy.audit_notes import (
    connection_added,
    connection_edited,
    connection_moved,
    connection_removed,
)
from policy.domain.edits import (
    add_connection,
    connection_count,
    move_connection,
    remove_connection,
    set_namespaces,
    update_connection,
)
from policy.forms_connections import CONNECTION_FORMS, ConnectionForm, NamedServiceConnectionForm
from policy.selectors import DraftState, agent_resolution, draft_state
from policy.services import StaleRevision
from policy.views.agents import agent_entry, require_agent, show_agent
from policy.views.common import (
    Edit,
    apply_edit,
    conflict_context,
    page_url,
    problem,
    submitted_input,
)
from web.rendering import HtmxHttpRequest, render_page

CONNECTION_TEMPLATE = "policy/connection_form.html"


#: Panels other apps add to a connection's page, by context name: ``build(state, agent, connection,
#: resolution)``. Discovery registers its panel in its ``AppConfig.ready``; policy imports no app
#: above it.
CONNECTION_PANELS: dict[str, Callable[[DraftState, str, Connection, Any], Any]] = {}


def connection_or_404(state: DraftState, agent: str, index: int) -> Connection:
    resolution = agent_resolution(state, agent)
    connection = resolution.connection(index)
    if connection is not None:
        return connection
    raise Http404(f"Agent {agent!r} has no connection #{index + 1}.")


def _connection_page(
    state: DraftState, agent: str, form: ConnectionForm | None, **extra: Any
) -> dict[str, Any]:
    index = extra.get("index")
    panels = [name for name in CONNECTION_PANELS if name not in extra]
    if isinstance(index, int) and panels:
        resolution = agent_resolution(state, agent)
        connection = resolution.connection(index)
        if connection is not None:
            for name in panels:
                extra[name] = CONNECTION_PANELS[name](state, agent, connection, resolution)
    return {
        "state": state,
        "base_revision": state.revision,
        "agent": agent,
        "agent_url": reverse("policy:agent", args=[agent]),
        "form": form,
        "kind": form.kind if form is not None else extra.get("kind", ""),
        **extra,
    }


def connection_page(
    request: HtmxHttpRequest | HttpRequest,
    agent: str,
    index: int,
    *,
    notice: str = "",
    status: int = 200,
) -> HttpResponse:
    """The connection's edit page as a GET shows it, with ``notice`` (what an action did)."""
    state = draft_state()
    connection = connection_or_404(state, agent, index)
    form_class = CONNECTION_FORMS.get(connection.kind or "")
    form = form_class(existing=connection.raw) if form_class is not None else None
    context = _connection_page(state, agent, form, index=index, discovery_notice=notice)
    return render(request, CONNECTION_TEMPLATE, context, status=status)


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


def _conflict(
    request: HtmxHttpRequest,
    exc: StaleRevision,
    agent: str,
    form: ConnectionForm,
    index: int | None,
) -> HttpResponse:
    """409: the editor again, holding the user's input, beside the connection (or, when
    adding, the agent's connections) as the draft has them now."""
    now = draft_state()
    entry = agent_entry(now, agent)
    if index is None:
        current, what = entry, f"agent {agent}"
    else:
        try:
            current = connection_or_404(now, agent, index).raw
        except Http404:
            current = None
        what = f"connection #{index + 1} of {agent}"
    conflict = conflict_context(exc, current=current, yours=submitted_input(request), what=what)
    if entry is None or (index is not None and current is None):
        return problem(request, str(exc), status=409, conflict=conflict)
    extra: dict[str, Any] = {"adding": True} if index is None else {"index": index}
    context = _connection_page(
        now, agent, form, conflict=conflict, reload_url=page_url(request), **extra
    )
    template = f"{CONNECTION_TEMPLATE}#connection-editor" if request.htmx else CONNECTION_TEMPLATE
    return render(request, template, context, status=409)


@require_http_methods(["GET", "POST"])
def connection_add(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    state = draft_state()
    require_agent(state, agent)
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
    return apply_edit(
        request,
        edit,
        lambda new_state: show_agent(request, new_state, agent),
        audit=connection_added(agent),
        on_conflict=lambda exc: _conflict(request, exc, agent, form, None),
    )


@require_http_methods(["GET", "POST"])
def connection_edit(request: HtmxHttpRequest, agent: str, index: int) -> HttpResponse:
    state = draft_state()
    connection = connection_or_404(state, agent, index)
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
    return apply_edit(
        request,
        edit,
        lambda new_state: show_agent(request, new_state, agent),
        audit=connection_edited(agent, index),
        on_conflict=lambda exc: _conflict(request, exc, agent, form, index),
    )


@require_POST
def connection_remove(request: HtmxHttpRequest, agent: str, index: int) -> HttpResponse:
    connection_or_404(draft_state(), agent, index)
    return apply_edit(
        request,
        lambda doc: remove_connection(doc, agent, index),
        lambda state: show_agent(request, state, agent),
        audit=connection_removed(agent, index),
        current=lambda state: agent_entry(state, agent),
        what=f"agent {agent}",
    )


@require_POST
def connection_move(request: HtmxHttpRequest, agent: str, index: int) -> HttpResponse:
    connection_or_404(draft_state(), agent, index)
    direction = request.POST.get("direction")
    if direction not in ("up", "down"):
        return problem(request, "Say whether to move the connection up or down.", status=422)
    to = index - 1 if direction == "up" else index + 1
    return apply_edit(
        request,
        lambda doc: move_connection(doc, agent, index, to),
        lambda state: show_agent(request, state, agent),
        audit=connection_moved(agent, index, to),
        current=lambda state: agent_entry(state, agent),
        what=f"agent {agent}",
    )
