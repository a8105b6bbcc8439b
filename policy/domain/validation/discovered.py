"""Diagnostics from what discovery found on an MCP server (docs/discovery.md).

They use only manifest entries discovery wrote (``source.kind == "mcp"``): a hand-written
manifest says nothing about pages or annotations. Discovery lists a server with Traitdeck's own
credentials, and a server may list other tools to the runtime's: every message says so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.tools.annotations import classes, destructive, hints, read_only, suggest
from engine.tools.connections import Connection
from engine.tools.loading import MCP, WILDCARD, mcp_server
from engine.tools.manifest import Manifest
from engine.tools.mcp_servers import server_config
from engine.tools.resolution import AgentResolution, EffectiveTool
from engine.traits.traits import is_early, normalize_strategy
from policy.domain.validation.report import Reporter

#: Said by every diagnostic made from a listing (a server may answer per credential).
CREDENTIALS: Final = " (as listed to Traitdeck's credentials; the runtime's may see another list)"
_SHOWN: Final = 8


@dataclass(frozen=True)
class ServerFacts:
    """What the operator set per MCP server id, outside the policy: which servers are trusted
    and which have a discovery source. Given (the web), an MCP connection with no config
    Traitdeck can read and no source gets ``mcp-server-unconfigured``; absent (the CLI, which
    cannot discover), that info is not given."""

    trusted: frozenset[str] = frozenset()
    sourced: frozenset[str] = frozenset()


def discovered_tools(manifest: Manifest | None, alias: str) -> dict[str, Mapping[str, Any]]:
    """Tool name → manifest entry, for the tools discovery listed on ``alias``'s server."""
    if manifest is None:
        return {}
    prefix = f"mcp.{alias}."
    return {
        tool_id[len(prefix) :]: entry
        for tool_id, entry in manifest.entries.items()
        if tool_id.startswith(prefix) and manifest.source_for(tool_id).get("kind") == "mcp"
    }


def listed_names(connection: Connection) -> list[str] | None:
    """The connection's ``allowed`` (or ``tools``) names; ``None`` means all the server's."""
    raw = connection.raw.get("allowed")
    if raw is None:
        raw = connection.raw.get("tools")
    if not isinstance(raw, list) or not raw:
        return None
    names = [str(n) for n in raw if isinstance(n, str)]
    return None if WILDCARD in names else names


def _names(values: Collection[str]) -> str:
    shown = sorted(values)[:_SHOWN]
    more = len(values) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def check_discovered(
    reporter: Reporter,
    data: Any,
    resolution: AgentResolution,
    manifest: Manifest | None,
    servers: ServerFacts | None = None,
) -> None:
    trusted = servers.trusted if servers is not None else frozenset()
    tools = {tool.tool_id: tool for tool in resolution.tools if not tool.builtin}
    for connection in resolution.connections:
        if connection.kind != MCP or not connection.loadable or not connection.alias:
            continue
        server = mcp_server(connection.raw)
        found = discovered_tools(manifest, connection.alias)
        if not found:
            if servers is not None and server not in servers.sourced:
                _unconfigured(reporter, data, connection, server)
            continue
        listed = listed_names(connection)
        _allowed_missing(reporter, connection, listed, found)
        offered = {n: e for n, e in found.items() if listed is None or n in listed}
        _beyond_first_page(reporter, connection, offered)
        _wildcard_mixed(reporter, connection, offered)
        for name, entry in offered.items():
            tool = tools.get(connection.tool_id(name))
            if tool is None:
                continue
            if not tool.traits:
                reporter.info(
                    "tool-untraited",
                    connection.path,
                    f"{tool.tool_id} was discovered{CREDENTIALS} but has no traits at all: the "
                    "runtime gives it strategy [unknown], so it always runs alone.",
                    f"Add tool_traits.{name} (Apply suggestions writes one from its annotations).",
                    at="first_key",
                )
            if server in trusted:
                _contradiction(reporter, connection, tool, entry)


def _unconfigured(reporter: Reporter, data: Any, connection: Connection, server: str) -> None:
    if server_config(data, server) is not None:
        return
    reporter.info(
        "mcp-server-unconfigured",
        connection.path,
        f"MCP server {server!r} has no config anywhere in this policy (surfaces.as_consumer.mcp."
        "services, mcp.services, mcp_services): the runtime takes it from the deployment's "
        "MCP_SERVICES, so Traitdeck does not know its tools.",
        "Set a discovery source for this server id on the connection's page (a URL, or an "
        "allowlisted command), then Discover tools.",
        at="first_key",
    )


def _allowed_missing(
    reporter: Reporter,
    connection: Connection,
    listed: list[str] | None,
    found: Mapping[str, Any],
) -> None:
    if listed is None:
        return
    key = "allowed" if connection.raw.get("allowed") is not None else "tools"
    for index, name in enumerate(connection.raw.get(key) or []):
        if not isinstance(name, str) or name in found:
            continue
        reporter.warning(
            "mcp-allowed-missing",
            (*connection.path, key, index),
            f"The server does not list {name!r}{CREDENTIALS}: the runtime offers no such tool, "
            f"and its traits apply to nothing. Listed: {_names(found)}.",
            "Fix the name, or discover again if the server changed.",
        )


def _beyond_first_page(
    reporter: Reporter, connection: Connection, offered: Mapping[str, Mapping[str, Any]]
) -> None:
    late = [n for n, e in offered.items() if _page(e) > 1]
    if not late:
        return
    reporter.warning(
        "mcp-beyond-first-page",
        connection.path,
        f"{len(late)} tool(s) of {connection.alias} are past the server's first page of "
        f"tools/list{CREDENTIALS}: {_names(late)}. The runtime reads one page only, so the "
        "model never sees them.",
        "Ask the server to list them on its first page (a larger page size), or drop them "
        "from allowed.",
        at="first_key",
    )


def _page(entry: Mapping[str, Any]) -> int:
    source = entry.get("source")
    page = source.get("page") if isinstance(source, Mapping) else None
    return page if isinstance(page, int) and not isinstance(page, bool) else 1


def _wildcard_mixed(
    reporter: Reporter, connection: Connection, offered: Mapping[str, Mapping[str, Any]]
) -> None:
    traits = connection.traits_raw()
    if WILDCARD not in traits or not isinstance(traits[WILDCARD], Mapping) or len(offered) < 2:
        return
    sides: dict[tuple[bool, bool], list[str]] = {}
    for name, entry in offered.items():
        sides.setdefault(classes(_annotations(entry)), []).append(name)
    if len(sides) < 2:
        return
    shown = "; ".join(
        f"{_label(ro, dest)}: {_names(names)}" for (ro, dest), names in sorted(sides.items())
    )
    suggested = {
        name: suggest(name, _annotations(entry), trusted=False).strategy
        for name, entry in offered.items()
    }
    # The entries that change something first: those whose suggestion differs from the '*'.
    current = set(normalize_strategy(traits[WILDCARD].get("strategy")))
    first = sorted(suggested, key=lambda n: ({suggested[n]} == current, n))[:_SHOWN]
    entries = ", ".join(f"{n}: {{strategy: [{suggested[n]}]}}" for n in first)
    reporter.warning(
        "mcp-wildcard-mixed",
        (*connection.path, "tool_traits", WILDCARD),
        f"'*' gives every tool of {connection.alias} one trait mapping, but the server's "
        f"annotations (defaults filled in) say they differ{CREDENTIALS} — {shown}.",
        f"Write concrete entries instead (Apply suggestions does it): {entries}.",
        at="key",
    )


def _label(ro: bool, dest: bool) -> str:
    if ro:
        return "read-only"
    return "destructive" if dest else "writes, non-destructive"


def _annotations(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    found = entry.get("annotations")
    return found if isinstance(found, Mapping) else None


def _contradiction(
    reporter: Reporter, connection: Connection, tool: EffectiveTool, entry: Mapping[str, Any]
) -> None:
    annotations = _annotations(entry)
    path = tool.trait_paths.get("strategy") or connection.path
    found = hints(annotations)
    marks = ", ".join(f"{h.name} {str(h.value).lower()} ({h.mark})" for h in found.values())
    if "exploration" in tool.strategy and destructive(annotations):
        reporter.warning(
            "trait-contradicts-annotation",
            path,
            f"{tool.tool_id} has strategy exploration (a read), but its trusted server marks it "
            f"destructive ({marks}).",
            "Give it strategy [exploitation], or fix the server's annotations.",
            at="key",
        )
    if is_early(tool.traits) and not (
        read_only(annotations).value or found["idempotentHint"].value
    ):
        reporter.warning(
            "trait-contradicts-annotation",
            tool.trait_paths.get("execution") or path,
            f"{tool.tool_id} has the early profile (it may start while the model still "
            f"writes), but its trusted server marks it neither read-only nor idempotent "
            f"({marks}).",
            "Drop the early profile, or make the tool idempotent and say so in its annotations.",
            at="key",
        )
