"""Reads for the discovery panel of an MCP connection's page (docs/discovery.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from discovery.mcp_list import refusal
from engine.tools.annotations import Hint, Suggestion, hints, suggest
from engine.tools.connections import Connection
from engine.tools.loading import MCP, mcp_server
from engine.tools.mcp_servers import server_config
from engine.tools.resolution import AgentResolution
from policy.domain.validation.discovered import discovered_tools, listed_names
from policy.models import McpServerSetting
from policy.selectors import DraftState, manifest_for, server_facts


@dataclass(frozen=True)
class DiscoveredRow:
    name: str
    tool_id: str
    description: str
    page: int
    offered: bool
    hints: tuple[Hint, ...]
    suggestion: Suggestion
    strategy: tuple[str, ...]
    source: Mapping[str, Any]


@dataclass(frozen=True)
class DiscoveryPanel:
    server_id: str
    config_where: str | None
    setting: McpServerSetting | None
    trusted: bool
    #: Why the Discover button is disabled (``None``: it is enabled).
    disabled_reason: str | None
    rows: tuple[DiscoveredRow, ...]

    @property
    def command_json(self) -> str:
        command = self.setting.source_command if self.setting is not None else None
        return json.dumps(command) if command else ""

    @property
    def allowlist_hint(self) -> str:
        """The setting an operator adds so that this server's discovery source may be contacted,
        with the value for it: the source's origin for a URL, its argv for a command (the
        settings as docs/discovery.md gives them); an example value when there is no source."""
        setting = self.setting
        if setting is not None and setting.source_url:
            parts = urlsplit(setting.source_url)
            if parts.scheme in ("http", "https") and parts.hostname:
                port = parts.port or (443 if parts.scheme == "https" else 80)
                return f"TRAITDECK_MCP_HTTP_HOSTS={parts.scheme}://{parts.hostname}:{port}"
        if setting is not None and setting.source_command:
            return f"TRAITDECK_MCP_STDIO_COMMANDS='{json.dumps([setting.source_command])}'"
        return (
            "TRAITDECK_MCP_HTTP_HOSTS=https://mcp.example.com:443 (an HTTP or SSE server's"
            ' origin), or TRAITDECK_MCP_STDIO_COMMANDS=\'[["/usr/bin/python3",'
            ' "/srv/mcp/files.py"]]\' (a command\'s argv, or {"argv": […], "env": ["FILES_TOKEN"]}'
            " to pass it variables)"
        )

    @property
    def source_text(self) -> str | None:
        """The discovery source kept in Traitdeck, as the page names it."""
        setting = self.setting
        if setting is None:
            return None
        if setting.source_url:
            return setting.source_url
        if setting.source_command:
            return json.dumps(setting.source_command)
        return None

    @property
    def beyond_first_page(self) -> list[str]:
        return [row.name for row in self.rows if row.offered and row.page > 1]

    @property
    def default_only(self) -> list[str]:
        return [row.name for row in self.rows if row.offered and row.suggestion.only_defaults]


def discovery_panel(
    state: DraftState, agent: str, connection: Connection, resolution: AgentResolution
) -> DiscoveryPanel | None:
    if connection.kind != MCP or not connection.alias:
        return None
    from discovery.services import DiscoveryRefused, discovery_allowlist, discovery_target

    server = mcp_server(connection.raw)
    config = server_config(state.data, server, os.environ.get("MCP_SERVICES", ""))
    setting = McpServerSetting.objects.filter(server_id=server).first()
    trusted = server in server_facts().trusted
    reason: str | None
    try:
        allowlist = discovery_allowlist()
        if allowlist.empty:
            reason = (
                "Nothing is allowlisted: an operator sets TRAITDECK_MCP_STDIO_COMMANDS (argv "
                "lists) or TRAITDECK_MCP_HTTP_HOSTS (host names) before Traitdeck starts or "
                "contacts any server."
            )
        else:
            target, _ = discovery_target(state, server, allowlist, read_credential=False)
            reason = refusal(target, allowlist)
    except DiscoveryRefused as exc:
        reason = str(exc)
    manifest = manifest_for(agent)
    found = discovered_tools(manifest, connection.alias)
    listed = listed_names(connection)
    rows = []
    for name, entry in found.items():
        tool_id = connection.tool_id(name)
        annotations = entry.get("annotations")
        annotations = annotations if isinstance(annotations, Mapping) else None
        tool = resolution.find(tool_id)
        source = manifest.source_for(tool_id) if manifest is not None else {}
        page = source.get("page")
        page = page if isinstance(page, int) else 1
        rows.append(
            DiscoveredRow(
                name=name,
                tool_id=tool_id,
                description=str(entry.get("description") or ""),
                page=page,
                offered=listed is None or name in listed,
                hints=tuple(hints(annotations).values()),
                suggestion=suggest(tool_id, annotations, trusted=trusted),
                strategy=tool.strategy if tool is not None else (),
                source=source,
            )
        )
    return DiscoveryPanel(
        server_id=server,
        config_where=config.where if config is not None else None,
        setting=setting,
        trusted=trusted,
        disabled_reason=reason,
        rows=tuple(rows),
    )
