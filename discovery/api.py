"""Tool discovery over the API: list one MCP server an agent connects to (docs/discovery.md)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.errors import HttpError

from accounts.auth import session_auth
from discovery.services import mcp_discover
from policy.api import agent_or_404
from policy.api_edit_schemas import WRITE_ERRORS
from policy.selectors import draft_state

router = Router(tags=["discovery"], auth=session_auth)


class DiscoverOut(Schema):
    server_id: str
    aliases: list[str]
    tools: int
    pages: int
    seconds: float
    sdk: str
    revision: int


@router.post(
    "/agents/{agent}/mcp/{server_id}/discover",
    response={200: DiscoverOut, **WRITE_ERRORS},
)
def mcp_discover_post(request: HttpRequest, agent: str, server_id: str) -> Any:
    """List the MCP server ``server_id`` with Traitdeck's credentials (every page, within the
    time limit and caps, only where the allowlists allow) and store its tools as the agent's
    manifest entries. 404: no such agent, or it has no MCP connection to that server; 422:
    refused (not allowlisted, no config or source, needs a secret) or the listing failed."""
    agent_or_404(draft_state(), agent)
    try:
        found = mcp_discover(agent=agent, server_id=server_id, user=request.user)
    except LookupError as exc:
        raise HttpError(404, str(exc)) from None
    return {
        "server_id": found.server_id,
        "aliases": list(found.aliases),
        "tools": found.tools,
        "pages": found.pages,
        "seconds": round(found.seconds, 3),
        "sdk": found.sdk,
        "revision": found.revision,
    }
