"""Discovery's pages, in the ``policy:`` namespace (``pages.policy_urls`` routes them): list a
connection's MCP server or ask the agent, the server's settings, the suggestions from its
annotations."""

from __future__ import annotations

from django.urls import path

import web.converters  # noqa: F401  (registers <id:…>, for stored identifiers)
from discovery import views as discovery

urlpatterns = [
    path(
        "agents/<id:agent>/connections/<int:index>/discover/",
        discovery.connection_discover,
        name="connection-discover",
    ),
    path(
        "agents/<id:agent>/connections/<int:index>/discover-from-agent/",
        discovery.agent_discover,
        name="agent-discover",
    ),
    path(
        "agents/<id:agent>/connections/<int:index>/mcp-server/",
        discovery.mcp_server_settings,
        name="mcp-server",
    ),
    path(
        "agents/<id:agent>/connections/<int:index>/suggestions/",
        discovery.connection_suggestions,
        name="connection-suggestions",
    ),
]
