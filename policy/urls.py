from __future__ import annotations

from django.urls import path

import web.converters  # noqa: F401  (registers <id:…>, for stored identifiers)
from policy.views import (
    agents,
    connections,
    inspect,
    manifest,
    suites,
    tools,
    transfer,
)

app_name = "policy"

# The impact pages and the publish page are in this namespace too, routed from
# ``pages.policy_urls`` (they replay observe's rounds, and observe sits above policy).

urlpatterns = [
    path("", agents.agent_list, name="agents"),
    path("agents/add/", agents.agent_add, name="agent-add"),
    path("agents/<id:agent>/", agents.agent_detail, name="agent"),
    path("agents/<id:agent>/rename/", agents.agent_rename, name="agent-rename"),
    path("agents/<id:agent>/remove/", agents.agent_remove, name="agent-remove"),
    path("agents/<id:agent>/manifest/", manifest.manifest_view, name="manifest"),
    path("agents/<id:agent>/suite/", suites.suite_view, name="suite"),
    path("agents/<id:agent>/connections/new/", connections.connection_add, name="connection-add"),
    path(
        "agents/<id:agent>/connections/<int:index>/edit/",
        connections.connection_edit,
        name="connection-edit",
    ),
    path(
        "agents/<id:agent>/connections/<int:index>/remove/",
        connections.connection_remove,
        name="connection-remove",
    ),
    path(
        "agents/<id:agent>/connections/<int:index>/move/",
        connections.connection_move,
        name="connection-move",
    ),
    path(
        "agents/<id:agent>/connections/<int:index>/tools/<id:key>/",
        tools.tool_edit,
        name="tool-edit",
    ),
    path(
        "agents/<id:agent>/connections/<int:index>/tools/<id:key>/preview/",
        tools.tool_preview,
        name="tool-preview",
    ),
    path("agents/<id:agent>/effective/", inspect.effective_view, name="effective"),
    path("agents/<id:agent>/catalog/", inspect.catalog_view, name="catalog"),
    path("agents/<id:agent>/playground/", inspect.playground, name="playground"),
    path("import/", transfer.import_view, name="import"),
    path("glossary/", inspect.glossary_view, name="glossary"),
    path("export.yaml", transfer.export_view, name="export"),
    path("export/descriptor/", transfer.export_descriptor_view, name="export-descriptor"),
]
