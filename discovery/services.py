"""Tool discovery as a service: list an MCP server an agent connects to and store what it lists
as the agent's manifest (docs/discovery.md); the operator's per-server settings; applying the
suggested traits to the draft.

Discovery starts processes and opens connections from what a policy says, so what it may run,
pass or read is decided by the operator's settings, never by policy text an editor can write: a
stdio command runs only when allowlisted, with only the ``env`` names its entry allows; a token
is read only from a variable ``TRAITDECK_MCP_CREDENTIALS`` allows for the endpoint's origin, for
this run only, and never leaves this module (not stored, shown, logged or audited). Every run,
refused or failed too, is one audit entry: who, which server, how many tools, how long.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import anyio
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.services import actor_label, audit_record
from discovery.mcp_list import (
    Allowlist,
    DiscoveryError,
    Limits,
    Listing,
    Target,
    credential,
    env_refusal,
    list_tools,
    manifest_entries,
    parse_commands,
    parse_credentials,
    parse_hosts,
    refusal,
    url_origin,
)
from engine.tools.annotations import suggest
from engine.tools.connections import Connection
from engine.tools.loading import MCP, WILDCARD, mcp_server
from engine.tools.manifest import parse_manifest
from engine.tools.mcp_servers import HTTP, SSE, STDIO, ServerConfig, auth_headers, server_config
from policy.audit_notes import AuditNote, connection_target, same_part
from policy.domain.edits import connection_mapping
from policy.domain.validation.discovered import discovered_tools, listed_names
from policy.models import AgentManifest, McpServerSetting
from policy.selectors import (
    DraftState,
    agent_resolution,
    draft_state,
    manifest_for,
    server_facts,
)
from policy.services import EditRefused, bump_revision, draft_change, locked_draft, signed_in_user

MCP_DISCOVER: Final = "mcp.discover"
MCP_SERVER_SET: Final = "mcp.server.set"
TOOLS_SUGGESTED: Final = "tool.suggestions"


class DiscoveryRefused(EditRefused):
    """Traitdeck will not (or cannot) list this server; the message says why and what to do."""


@dataclass(frozen=True)
class Discovered:
    server_id: str
    aliases: tuple[str, ...]
    tools: int
    pages: int
    seconds: float
    sdk: str
    revision: int


def discovery_allowlist() -> Allowlist:
    """The operator's settings as one :class:`Allowlist`; :class:`DiscoveryRefused` when one
    of them cannot be read (``python manage.py check`` reports the same)."""
    try:
        return Allowlist(
            commands=parse_commands(settings.TRAITDECK_MCP_STDIO_COMMANDS),
            hosts=parse_hosts(settings.TRAITDECK_MCP_HTTP_HOSTS),
            credentials=parse_credentials(settings.TRAITDECK_MCP_CREDENTIALS),
        )
    except ValueError as exc:
        raise DiscoveryRefused(f"A discovery setting cannot be read: {exc}") from None


#: Discoveries running in this process, by server id, under one lock (issue 34: three 40 MB
#: listings at once took a worker to 650 MiB).
_running: set[str] = set()
_running_lock = threading.Lock()


@contextmanager
def _one_at_a_time(server_id: str) -> Iterator[None]:
    """One discovery per server at a time, at most ``TRAITDECK_MCP_CONCURRENT`` in all (per
    worker process); refused with a sentence, never queued (a listing may take its time limit)."""
    with _running_lock:
        if server_id in _running:
            raise DiscoveryRefused(
                f"A discovery of {server_id!r} is already running: try again when it has ended."
            )
        if len(_running) >= settings.TRAITDECK_MCP_CONCURRENT:
            raise DiscoveryRefused(
                f"{len(_running)} discoveries are running (TRAITDECK_MCP_CONCURRENT): try again "
                "in a moment."
            )
        _running.add(server_id)
    try:
        yield
    finally:
        with _running_lock:
            _running.discard(server_id)


def discovery_limits() -> Limits:
    return Limits(
        timeout_s=settings.TRAITDECK_MCP_TIMEOUT_S,
        max_tools=settings.TRAITDECK_MCP_MAX_TOOLS,
        max_bytes=settings.TRAITDECK_MCP_MAX_BYTES,
    )


def agent_mcp_aliases(state: DraftState, agent: str, server_id: str) -> tuple[str, ...]:
    """The aliases under which ``agent``'s MCP connections reach ``server_id``."""
    resolution = agent_resolution(state, agent)
    return tuple(
        dict.fromkeys(
            c.alias
            for c in resolution.connections
            if c.kind == MCP and c.alias and mcp_server(c.raw) == server_id
        )
    )


def discovery_target(
    state: DraftState, server_id: str, allowlist: Allowlist, *, read_credential: bool = True
) -> tuple[Target, str]:
    """Where to list ``server_id`` and a phrase saying where that came from; raises
    :class:`DiscoveryRefused` when there is nowhere Traitdeck may go or the config asks for
    what ``allowlist`` does not allow. ``read_credential=False`` checks without reading it."""
    config = server_config(state.data, server_id, os.environ.get("MCP_SERVICES", ""))
    if config is not None:
        target = _config_target(config, allowlist, read_credential=read_credential)
        return target, f"the config at {config.where}"
    setting = McpServerSetting.objects.filter(server_id=server_id).first()
    if setting is not None and setting.source_command:
        argv = tuple(str(a) for a in setting.source_command)
        return Target(STDIO, argv=argv), "the discovery source set in Traitdeck"
    if setting is not None and setting.source_url:
        transport = SSE if setting.transport == SSE else HTTP
        return Target(transport, url=setting.source_url), "the discovery source set in Traitdeck"
    raise DiscoveryRefused(
        f"MCP server {server_id!r} has no config anywhere Traitdeck can read and no discovery "
        "source: set one (a URL or an allowlisted command) for this server id."
    )


def _config_target(
    config: ServerConfig, allowlist: Allowlist, *, read_credential: bool = True
) -> Target:
    """The target a policy's server config names, checked against the operator's settings
    before anything is read: a stdio child gets only the ``env`` names its allowlist entry
    allows; a token is read only from a variable allowed for the endpoint's origin."""
    who = f"MCP server {config.server_id!r}"
    if config.problems:
        raise DiscoveryRefused(f"{who} cannot be listed: {'; '.join(config.problems)}.")
    if config.transport == STDIO:
        command = allowlist.command(config.argv)
        why = env_refusal(command, config.env_names) if command is not None else None
        if why is not None:
            raise DiscoveryRefused(f"Traitdeck will not list {config.server_id!r}: {why}")
    if config.needs_secret:
        raise DiscoveryRefused(
            f"{who} needs a secret Traitdeck cannot read (KDCube's secret store: "
            f"{', '.join(config.secrets)}); set a discovery source instead."
        )
    if config.transport == STDIO:
        # A stdio child gets no auth header: nothing of the server's environment is read.
        return Target(STDIO, argv=config.argv, env=dict(config.env))
    headers: dict[str, str] = {}
    if config.auth_type and auth_headers(config, "-"):
        if not config.auth_env:
            raise DiscoveryRefused(f"{who} needs a token, but its auth.env is not set.")
        try:
            origin = url_origin(config.url)
            token = credential(allowlist, origin, config.auth_env) if read_credential else "-"
        except (DiscoveryError, ValueError) as exc:
            raise DiscoveryRefused(f"Traitdeck will not list {config.server_id!r}: {exc}") from None
        headers = auth_headers(config, token)
    return Target(config.transport, url=config.url, headers=headers)


def mcp_discover(*, agent: str, server_id: str, user: Any = None) -> Discovered:
    """List ``server_id`` and store its tools in ``agent``'s manifest under every alias the
    agent reaches it by. Raises ``LookupError`` (no such connection), :class:`DiscoveryRefused`
    (not allowed, nowhere to go) or :class:`DiscoveryRefused` for a failed listing; every
    outcome is audited."""
    state = draft_state()
    aliases = agent_mcp_aliases(state, agent, server_id)
    if not aliases:
        raise LookupError(f"Agent {agent!r} has no MCP connection to server {server_id!r}.")
    try:
        allowlist = discovery_allowlist()
        # Checked with the credential unread first: nothing is read for a refused target.
        target, origin = discovery_target(state, server_id, allowlist, read_credential=False)
        why = refusal(target, allowlist)
        if why is not None:
            raise DiscoveryRefused(f"Traitdeck will not list {server_id!r}: {why}")
        target, origin = discovery_target(state, server_id, allowlist)
        with _one_at_a_time(server_id):
            listing = anyio.run(list_tools, target, discovery_limits(), allowlist)
    except (DiscoveryRefused, DiscoveryError) as exc:
        _audit_run(user, agent, server_id, error=str(exc))
        raise DiscoveryRefused(str(exc)) from None
    return _store(
        agent=agent,
        server_id=server_id,
        aliases=aliases,
        listing=listing,
        user=user,
        transport=target.transport,
        origin=origin,
    )


@transaction.atomic
def _store(
    *,
    agent: str,
    server_id: str,
    aliases: tuple[str, ...],
    listing: Listing,
    user: Any,
    transport: str,
    origin: str,
) -> Discovered:
    draft, current = locked_draft(None)
    old = AgentManifest.objects.filter(agent=agent).values_list("data", flat=True).first() or {}
    data = {
        tool_id: entry
        for tool_id, entry in old.items()
        if not _discovered_from(entry, server_id)
        or not any(tool_id.startswith(f"mcp.{a}.") for a in aliases)
    }
    at = timezone.now().isoformat(timespec="seconds")
    for alias in aliases:
        fresh = manifest_entries(
            listing,
            alias=alias,
            server_id=server_id,
            by=actor_label(user),
            at=at,
            transport=transport,
        )
        for tool_id, entry in fresh.items():
            # Traits written by hand for a tool stay: discovery adds what the server said.
            kept = data.get(tool_id, {}).get("tool_traits")
            data[tool_id] = {**({"tool_traits": kept} if kept else {}), **entry}
    parse_manifest(data)
    bump_revision(draft, current, user)
    AgentManifest.objects.update_or_create(
        agent=agent, defaults={"data": data, "uploaded_by": signed_in_user(user)}
    )
    _audit_run(
        user,
        agent,
        server_id,
        tools=len(listing.tools),
        pages=listing.pages,
        seconds=round(listing.seconds, 3),
        transport=transport,
        origin=origin,
        sdk=listing.sdk_version,
    )
    return Discovered(
        server_id=server_id,
        aliases=aliases,
        tools=len(listing.tools),
        pages=listing.pages,
        seconds=listing.seconds,
        sdk=listing.sdk_version,
        revision=current + 1,
    )


def _discovered_from(entry: Any, server_id: str) -> bool:
    source = entry.get("source") if isinstance(entry, Mapping) else None
    return (
        isinstance(source, Mapping)
        and source.get("kind") == "mcp"
        and source.get("server_id") == server_id
    )


def _audit_run(user: Any, agent: str, server_id: str, **facts: Any) -> None:
    # Facts only (counts, timing, where from, the error sentence): never a header or a token.
    with transaction.atomic():
        audit_record(
            actor=user,
            action=MCP_DISCOVER,
            target=f"mcp server {server_id}",
            message="failed" if "error" in facts else f"{facts.get('tools')} tool(s) listed",
            after={"agent": agent, "server_id": server_id, **facts},
            ref={"agent": agent},
        )


@transaction.atomic
def mcp_server_set(
    *,
    server_id: str,
    source_url: str = "",
    source_command: list[str] | None = None,
    transport: str = "",
    trusted: bool = False,
    user: Any = None,
) -> McpServerSetting:
    """Set the operator's discovery source and trust for one server id (outside the policy)."""
    if source_url and source_command:
        raise DiscoveryRefused("Give a URL or a command, not both.")
    old = McpServerSetting.objects.filter(server_id=server_id).first()
    before = _setting_view(old) if old else None
    row, _ = McpServerSetting.objects.update_or_create(
        server_id=server_id,
        defaults={
            "source_url": source_url,
            "source_command": source_command or None,
            "transport": transport,
            "trusted": trusted,
            "updated_by": signed_in_user(user),
        },
    )
    audit_record(
        actor=user,
        action=MCP_SERVER_SET,
        target=f"mcp server {server_id}",
        before=before,
        after=_setting_view(row),
    )
    return row


def _setting_view(row: McpServerSetting) -> dict[str, Any]:
    return {
        "source_url": row.source_url,
        "source_command": row.source_command,
        "transport": row.transport,
        "trusted": row.trusted,
    }


def suggestions_apply(
    *, agent: str, index: int, base_revision: int | None, user: Any = None
) -> tuple[DraftState, list[str]]:
    """Write the suggested strategy of every discovered tool of connection ``index`` as a
    concrete entry, and take ``strategy`` out of its ``*`` entry (the wildcard would override
    the concrete entries). An ordinary edit: revision, audit, refused when stale. Returns the
    new state and the tools whose suggestion rests only on defaults."""
    state = draft_state()
    manifest = manifest_for(agent)
    resolution_connection = _connection(state, agent, index)
    alias = resolution_connection.alias or ""
    found = discovered_tools(manifest, alias)
    listed = listed_names(resolution_connection)
    offered = {n: e for n, e in found.items() if listed is None or n in listed}
    if not offered:
        raise DiscoveryRefused("Nothing was discovered on this connection: Discover tools first.")
    trusted = mcp_server(resolution_connection.raw) in server_facts().trusted
    suggestions = {
        name: suggest(f"mcp.{alias}.{name}", entry.get("annotations"), trusted=trusted)
        for name, entry in offered.items()
    }

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        agents = doc["surfaces"]["as_consumer"]["agents"]
        connection = agents[agent]["tools"][index]
        traits = dict(connection.get("tool_traits") or {})
        for name, suggestion in suggestions.items():
            entry = dict(traits.get(name) or {})
            entry["strategy"] = [suggestion.strategy]
            traits[name] = entry
        wildcard = traits.get(WILDCARD)
        if isinstance(wildcard, Mapping):
            rest = {k: v for k, v in wildcard.items() if k != "strategy"}
            if rest:
                traits[WILDCARD] = rest
            else:
                del traits[WILDCARD]
        connection["tool_traits"] = traits
        return doc

    new_state = draft_change(
        edit=edit,
        base_revision=base_revision,
        user=user,
        audit=AuditNote(
            TOOLS_SUGGESTED,
            connection_target(agent, index),
            same_part(lambda doc: connection_mapping(doc, agent, index)),
            {"agent": agent, "connection": index},
            message=f"applied {len(suggestions)} suggested trait(s) from MCP annotations",
        ),
    )
    return new_state, sorted(n for n, s in suggestions.items() if s.only_defaults)


def _connection(state: DraftState, agent: str, index: int) -> Connection:
    for connection in agent_resolution(state, agent).connections:
        if connection.index == index:
            if connection.kind != MCP:
                raise DiscoveryRefused("Suggestions apply to MCP connections only.")
            return connection
    raise LookupError(f"Agent {agent!r} has no connection {index}.")
