"""The discovery actions of an MCP connection's page: Discover tools, the server's discovery
source and trust, Apply suggestions (docs/discovery.md); and the agent page's Discover beside
each MCP connection. Plain POST forms: each answers with its page again, saying what happened."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from core.json_limits import NotJson, decode_json
from discovery.services import (
    Discovered,
    DiscoveryRefused,
    mcp_discover,
    mcp_server_set,
    suggestions_apply,
)
from engine.tools.connections import Connection
from engine.tools.loading import MCP, mcp_server
from policy.selectors import DraftState, draft_state
from policy.services import StaleRevision
from policy.views.agents import AGENT_TEMPLATE, agent_context
from policy.views.common import base_revision
from policy.views.connections import connection_or_404, connection_page
from web.rendering import render_page


def _opened(agent: str, index: int) -> HttpResponse:
    """These actions answer with the connection page at their own URL, which the address bar
    then shows: opened again (a reload, a bookmark, a copied link), it leads to that page."""
    url = reverse("policy:connection-edit", args=[agent, index])
    return HttpResponseRedirect(f"{url}#discovery")


@require_http_methods(["GET", "POST"])
def connection_discover(request: HttpRequest, agent: str, index: int) -> HttpResponse:
    state = draft_state()
    connection = _mcp(state, agent, index)
    if request.method == "GET":
        return _opened(agent, index)
    try:
        found = mcp_discover(agent=agent, server_id=mcp_server(connection.raw), user=request.user)
    except (DiscoveryRefused, LookupError) as exc:
        return connection_page(request, agent, index, notice=str(exc), status=422)
    return connection_page(request, agent, index, notice=_found(found))


def _found(found: Discovered) -> str:
    return (
        f"Discovered {found.tools} tool(s) on {found.pages} page(s) in {found.seconds:.2f} s "
        f"(mcp {found.sdk})."
    )


@require_http_methods(["GET", "POST"])
def agent_discover(request: HttpRequest, agent: str, index: int) -> HttpResponse:
    """Discover from the agent page: the connection's server is listed as from its own page,
    and the agent page comes back with what happened beside that connection's button."""
    connection = _mcp(draft_state(), agent, index)
    if request.method == "GET":  # the URL the form leaves in the address bar
        url = reverse("policy:agent", args=[agent])
        return HttpResponseRedirect(f"{url}#connection-{index}")
    try:
        found = mcp_discover(agent=agent, server_id=mcp_server(connection.raw), user=request.user)
    except (DiscoveryRefused, LookupError) as exc:
        result, status = {"index": index, "ok": False, "text": str(exc)}, 422
    else:
        result, status = {"index": index, "ok": True, "text": _found(found)}, 200
    context = agent_context(draft_state(), agent, discover_result=result)
    return render_page(request, AGENT_TEMPLATE, context, status=status)


@require_http_methods(["GET", "POST"])
def mcp_server_settings(request: HttpRequest, agent: str, index: int) -> HttpResponse:
    state = draft_state()
    connection = _mcp(state, agent, index)
    if request.method == "GET":
        return _opened(agent, index)
    raw_command = request.POST.get("source_command", "").strip()
    command: list[str] | None = None
    if raw_command:
        try:
            parsed = decode_json(raw_command.encode("utf-8", "surrogatepass"))
        except NotJson:  # not JSON, or nested past any argv (`[` x 100,000)
            parsed = None
        if not isinstance(parsed, list) or not all(isinstance(a, str) for a in parsed):
            return connection_page(
                request,
                agent,
                index,
                notice='The command must be a JSON array of strings, e.g. ["/usr/bin/python3", '
                '"/srv/mcp/files.py"]. Nothing was saved.',
                status=422,
            )
        command = parsed
    url = request.POST.get("source_url", "").strip()[:2000]
    try:
        mcp_server_set(
            server_id=mcp_server(connection.raw),
            source_url=url,
            source_command=command,
            transport="sse" if request.POST.get("transport") == "sse" else "",
            trusted=request.POST.get("trusted") == "on",
            user=request.user,
        )
    except DiscoveryRefused as exc:
        return connection_page(request, agent, index, notice=str(exc), status=422)
    return connection_page(request, agent, index, notice="Saved the server's settings.")


@require_http_methods(["GET", "POST"])
def connection_suggestions(request: HttpRequest, agent: str, index: int) -> HttpResponse:
    state = draft_state()
    _mcp(state, agent, index)
    if request.method == "GET":
        return _opened(agent, index)
    try:
        _, defaults = suggestions_apply(
            agent=agent, index=index, base_revision=base_revision(request), user=request.user
        )
    except (DiscoveryRefused, StaleRevision) as exc:
        status = 409 if isinstance(exc, StaleRevision) else 422
        return connection_page(request, agent, index, notice=str(exc), status=status)
    note = (
        f" These rest only on the spec's defaults (the server did not say): {', '.join(defaults)}."
        if defaults
        else ""
    )
    return connection_page(
        request, agent, index, notice="Applied the suggested traits to the draft." + note
    )


def _mcp(state: DraftState, agent: str, index: int) -> Connection:
    connection = connection_or_404(state, agent, index)
    if connection.kind != MCP:
        raise Http404(f"Connection #{index + 1} of {agent!r} is not an MCP connection.")
    return connection
