"""List one MCP server's tools with the official SDK: every page, within limits, only where the
operator allowed it (docs/discovery.md). No Django here: the management command, the API and
the bench call it alike.

The runtime reads the first page only and drops annotations; discovery reads every page and
keeps each tool exactly as sent (annotations with absent hints absent), with the page it came
on, so Traitdeck can say what the runtime would not see.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp.client.stdio as mcp_stdio
from anyio.streams.text import TextReceiveStream
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import Tool
from pydantic import TypeAdapter

from core.gc_pause import gc_paused
from engine.tools.mcp_servers import HTTP, SSE, STDIO

SDK_VERSION: Final = version("mcp")


class DiscoveryError(Exception):
    """Discovery could not list the server; the message is one plain sentence (never a
    secret: messages are shown, logged and audited)."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 20.0
    max_tools: int = 10_000
    max_bytes: int = 16 * 1024 * 1024


#: ``(scheme, host, port)``: where a credential may go (the port always written out).
Origin = tuple[str, str, int]
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


@dataclass(frozen=True)
class StdioCommand:
    """One ``TRAITDECK_MCP_STDIO_COMMANDS`` entry: the argv (matched exactly) and the
    environment variable names a policy's ``env`` may set for it (none for a bare argv)."""

    argv: tuple[str, ...]
    env: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Allowlist:
    """What discovery may run, where it may connect and which of the server's environment
    variables it may send where: ``TRAITDECK_MCP_STDIO_COMMANDS``, ``TRAITDECK_MCP_HTTP_HOSTS``
    (host names: any port; or origins ``scheme://host:port``; loopback only when listed) and
    ``TRAITDECK_MCP_CREDENTIALS`` (origin -> variable names). Only the operator sets these:
    nothing in a policy widens them (docs/security.md)."""

    commands: tuple[StdioCommand, ...] = ()
    hosts: frozenset[str] = frozenset()
    credentials: Mapping[Origin, frozenset[str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.commands and not self.hosts

    def command(self, argv: tuple[str, ...]) -> StdioCommand | None:
        return next((c for c in self.commands if c.argv == tuple(argv)), None)

    def allows_url(self, url: httpx2.URL) -> bool:
        """A request to ``url`` is allowed: its host is listed bare, or its origin is."""
        host = (url.host or "").lower()
        return host in self.hosts or origin_text(url_origin(url)) in self.hosts


def url_origin(url: httpx2.URL | str) -> Origin:
    """``(scheme, host, port)`` of ``url``, the scheme's default port written out."""
    parsed = httpx2.URL(url) if isinstance(url, str) else url
    scheme = parsed.scheme.lower()
    return scheme, (parsed.host or "").lower(), parsed.port or _DEFAULT_PORTS.get(scheme, 0)


def origin_text(origin: Origin) -> str:
    scheme, host, port = origin
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def credential(allowlist: Allowlist, origin: Origin, name: str) -> str:
    """The value of the server's environment variable ``name``, to be sent to ``origin``:
    read only when ``TRAITDECK_MCP_CREDENTIALS`` lists that name for exactly that origin
    (scheme included: plain http only when the operator wrote ``http://``). The one place
    discovery reads a variable a policy names; raises :class:`DiscoveryError` otherwise."""
    if name not in allowlist.credentials.get(origin, frozenset()):
        raise DiscoveryError(
            f"The config's auth.env names {name!r}, which TRAITDECK_MCP_CREDENTIALS does not "
            f"allow to be sent to {origin_text(origin)}; nothing was sent."
        )
    value = os.environ.get(name, "")
    if not value:
        raise DiscoveryError(
            f"The config's auth.env names {name!r}, which Traitdeck's environment does not have."
        )
    return value


@dataclass(frozen=True)
class Target:
    """What to connect to: a transport and an argv (stdio) or a URL (HTTP, SSE)."""

    transport: str
    argv: tuple[str, ...] = ()
    url: str = ""
    #: Literal environment the config names for the child (never secrets).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Auth headers for this run only: never stored, shown, logged or audited.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def describe(self) -> str:
        if self.transport == STDIO:
            return "stdio " + " ".join(self.argv)
        return f"{self.transport} {self.url}"


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str | None
    input_schema: Mapping[str, Any]
    #: As sent (camelCase keys, only the hints the server gave), or ``None``.
    annotations: Mapping[str, Any] | None
    page: int


@dataclass(frozen=True)
class Listing:
    tools: tuple[ListedTool, ...]
    pages: int
    seconds: float
    sdk_version: str = SDK_VERSION


def refusal(target: Target, allowlist: Allowlist) -> str | None:
    """Why ``target`` may not be contacted, or ``None``."""
    if target.transport == STDIO:
        if not target.argv:
            return "The server config has no command."
        command = allowlist.command(target.argv)
        if command is None:
            return (
                "Its command is not on TRAITDECK_MCP_STDIO_COMMANDS (argv lists matched exactly):"
                f" {json.dumps(list(target.argv))}."
            )
        return env_refusal(command, target.env)
    if target.transport not in (HTTP, SSE):
        return f"Transport {target.transport!r} is not stdio, streamable HTTP or SSE."
    parts = urlsplit(target.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{target.url!r} is not an http(s) URL."
    if not allowlist.allows_url(httpx2.URL(target.url)):
        return (
            f"Host {parts.hostname!r} (origin {origin_text(url_origin(target.url))}) is not on "
            "TRAITDECK_MCP_HTTP_HOSTS."
        )
    return None


def env_refusal(command: StdioCommand, names: Iterable[str]) -> str | None:
    """Why a policy's ``env`` names may not be set for ``command``'s child, or ``None``: only
    the names its ``TRAITDECK_MCP_STDIO_COMMANDS`` entry lists (``PYTHONWARNINGS``,
    ``LD_PRELOAD``, ``PYTHONPATH``… run code in the child)."""
    refused = sorted(set(names) - command.env)
    if not refused:
        return None
    allowed = ", ".join(sorted(command.env)) or "none"
    return (
        f"The config's env sets {', '.join(refused)}, which TRAITDECK_MCP_STDIO_COMMANDS does "
        f"not allow for this command (allowed: {allowed}); nothing was run."
    )


async def list_tools(target: Target, limits: Limits, allowlist: Allowlist = Allowlist()) -> Listing:
    """Every page of ``tools/list``; raises :class:`DiscoveryError` past a limit or on any
    failure (nothing partial is returned). Over HTTP and SSE every request goes only where
    ``allowlist`` allows (besides the target's own origin), and a request carrying a credential
    only to the target's own origin, whatever the server answers (:class:`_HostGuard`)."""
    started = time.perf_counter()
    stop = _Stop(anyio.CancelScope())
    garbage = _GarbageWatch(stop)
    watched = logging.getLogger("mcp.client.stdio")
    watched.addHandler(garbage)
    elsewhere = _EndpointWatch(stop, target.url)
    sse_log = logging.getLogger("mcp.client.sse")
    sse_log.addHandler(elsewhere)
    guard = _HostGuard(target, allowlist, stop, limits.max_bytes)
    counting = _RUN.set(guard)  # the stdio reader's tasks inherit it (_CountedText)
    try:
        with anyio.fail_after(limits.timeout_s), stop.scope:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(
                        await _transport(
                            target,
                            limits,
                            stack,
                            guard,
                        ),
                        cache=None,
                        # The runtime's v1 client does the initialize handshake: so do we
                        # (no server/discover probe first).
                        mode="legacy",
                    )
                )
                tools, pages = await _pages(client, limits)
        if stop.reason:
            raise DiscoveryError(stop.reason)
    except TimeoutError as exc:
        raise DiscoveryError(
            f"The server did not answer within {limits.timeout_s:g} s (TRAITDECK_MCP_TIMEOUT_S)."
        ) from exc
    except DiscoveryError:
        raise
    except Exception as exc:  # the SDK, the transport, the process: one plain sentence
        if stop.reason:  # stopped on purpose; the SDK may report it as its own failure
            raise DiscoveryError(stop.reason) from exc
        raise DiscoveryError(f"Listing failed: {_first_line(exc)}") from exc
    finally:
        _RUN.reset(counting)
        watched.removeHandler(garbage)
        sse_log.removeHandler(elsewhere)
    return Listing(tuple(tools), pages, time.perf_counter() - started)


async def _transport(
    target: Target, limits: Limits, stack: AsyncExitStack, guard: _HostGuard
) -> Any:
    if target.transport == STDIO:
        return StdioServerParameters(
            command=target.argv[0], args=list(target.argv[1:]), env=dict(target.env) or None
        )
    if target.transport == SSE:
        return sse_client(
            target.url,
            headers=dict(target.headers) or None,
            timeout=limits.timeout_s,
            sse_read_timeout=limits.timeout_s,
            httpx_client_factory=guard.client,
        )
    http = await stack.enter_async_context(
        guard.client(headers=dict(target.headers) or None, timeout=httpx2.Timeout(limits.timeout_s))
    )
    return streamable_http_client(target.url, http_client=http)


class _Stop:
    """Ends a run early with a reason (the first one given), instead of at the time limit."""

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self.reason = ""

    def __call__(self, reason: str) -> None:
        if not self.reason:
            self.reason = reason
            self.scope.cancel()


class _Refused(Exception):
    """Raised inside the HTTP client to keep a request from being sent or followed."""


class _HostGuard:
    """Traitdeck's own enforcement of ``TRAITDECK_MCP_HTTP_HOSTS`` over HTTP and SSE, not left
    to the SDK's redirect rule (which may change between versions):

    - every request the SDK's client is about to send must go to an allowlisted host (this also
      covers the address an SSE server names for the client's POSTs);
    - a redirect is followed only within the endpoint's origin (same scheme, host and port, as
      the SDK does: ``/mcp`` → ``/mcp/``). A redirect anywhere else stops the run, naming where
      it pointed, before anything is sent there — to a host off the list, and to another
      origin even when its host is listed: the request carries the headers (the token) set for
      this endpoint, and the page says which server it lists.
    """

    def __init__(
        self, target: Target, allowlist: Allowlist, stop: _Stop, max_bytes: int = 0
    ) -> None:
        #: Bytes received over HTTP so far, counted as they arrive (``TRAITDECK_MCP_MAX_BYTES``
        #: bounds them too: a 40 MB page was read and parsed whole before the cap was checked).
        self.received = 0
        self.max_bytes = max_bytes
        self.origin = httpx2.URL(target.url) if target.url else None
        # The target's own origin (not its whole host: an origin entry allows that port only).
        own = {origin_text(url_origin(self.origin))} if self.origin is not None else set()
        self.allowlist = Allowlist(hosts=allowlist.hosts | own)
        #: With a credential in the headers, every request stays on the endpoint's origin.
        self.only = url_origin(self.origin) if self.origin and target.headers else None
        self.stop = stop

    def client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        """The SDK's own client (its timeouts and headers) with the two checks as hooks; an
        ``McpHttpClientFactory`` for ``sse_client``."""
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks = {"request": [self._on_request], "response": [self._on_response]}
        if self.max_bytes:
            # httpx2 has no public hook on a response's bytes: its transport is wrapped.
            client._transport = _CountingTransport(client._transport, self)
        return client

    def count(self, size: int, *, raise_: bool = True) -> None:
        """``size`` more bytes arrived: stop the run as soon as the total passes the cap."""
        self.received += size
        if self.max_bytes and self.received > self.max_bytes:
            reason = (
                f"The server sent more than {self.max_bytes} bytes (TRAITDECK_MCP_MAX_BYTES); "
                "Traitdeck stopped reading, nothing was stored."
            )
            if raise_:
                self._refuse(reason)
            self.stop(reason)  # the run's scope is cancelled at the reader's next read

    async def _on_request(self, request: httpx2.Request) -> None:
        if self.only is not None and url_origin(request.url) != self.only:
            self._refuse(
                f"Traitdeck would have sent the credential to {_shown(request.url)}, another "
                f"origin than {origin_text(self.only)}; nothing was sent there."
            )
        if not self.allowlist.allows_url(request.url):
            self._refuse(
                f"Traitdeck would have sent a request to {_shown(request.url)}: host "
                f"{request.url.host!r} is not on TRAITDECK_MCP_HTTP_HOSTS; nothing was sent there."
            )

    async def _on_response(self, response: httpx2.Response) -> None:
        if not response.has_redirect_location:
            return
        sent = response.request.url
        location = sent.join(response.headers["Location"])
        if (location.scheme, location.host, location.port) == (sent.scheme, sent.host, sent.port):
            return  # within the origin: the SDK follows it (and _on_request checks it again)
        said = f"The server answered {response.status_code} redirecting to {_shown(location)}"
        if not self.allowlist.allows_url(location):
            self._refuse(
                f"{said}: host {location.host!r} is not on TRAITDECK_MCP_HTTP_HOSTS; "
                "Traitdeck did not follow it."
            )
        self._refuse(
            f"{said}, another origin: Traitdeck follows redirects only within the endpoint's "
            f"origin (host {location.host!r} is allowlisted: set that URL as the discovery "
            "source to list it)."
        )

    def _refuse(self, reason: str) -> NoReturn:
        self.stop(reason)
        raise _Refused(reason)


#: The run whose stdio reader is counting (each discovery's tasks see their own).
_RUN: ContextVar[_HostGuard | None] = ContextVar("traitdeck_discovery_run", default=None)


class _CountedText(TextReceiveStream):
    """The SDK's stdio reader stream, each chunk counted as it arrives: the SDK reads a line
    whole (re-joining its buffer on every chunk) before anything is parsed, so a 40 MB line took
    17 s and kept 161 MiB before the per-page cap saw it. Installed below as the name the SDK's
    stdio module reads (``tests/discovery/test_mcp_list.py`` fails if an SDK version stops
    using it); outside a discovery run it only passes the text on."""

    async def receive(self) -> str:
        text = await super().receive()
        run = _RUN.get()
        if run is not None:
            run.count(len(text), raise_=False)  # characters: at most the bytes
        return text


mcp_stdio.TextReceiveStream = _CountedText  # type: ignore[attr-defined]


class _CountingTransport(httpx2.AsyncBaseTransport):
    """The SDK client's transport, each response's body counted chunk by chunk as it arrives."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, guard: _HostGuard) -> None:
        self.inner, self.guard = inner, guard

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        response.stream = _CountedStream(response.stream, self.guard)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CountedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, guard: _HostGuard) -> None:
        self.inner, self.guard = inner, guard

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.guard.count(len(chunk))
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def _shown(url: httpx2.URL) -> str:
    # Where a request or redirect went, for a message: without userinfo, query or fragment,
    # which can carry secrets or state.
    return str(url.copy_with(userinfo=b"", query=None, fragment=None))


async def _pages(client: Client, limits: Limits) -> tuple[list[ListedTool], int]:
    tools: list[ListedTool] = []
    seen: set[str] = set()
    size = pages = 0
    cursor: str | None = None
    while True:
        pages += 1
        result = await client.list_tools(cursor=cursor)
        # One serialisation per page, not per tool (5,000 calls into pydantic were a third of
        # Traitdeck's own share of a 5,000-tool listing); the byte cap is checked per page.
        sent_page = _TOOLS.dump_python(result.tools, by_alias=True, exclude_unset=True, mode="json")
        size += len(json.dumps(sent_page, ensure_ascii=False).encode())
        if size > limits.max_bytes:
            raise DiscoveryError(
                f"The tool list is over {limits.max_bytes} bytes (TRAITDECK_MCP_MAX_BYTES)."
            )
        for sent in sent_page:
            name = sent["name"]
            if name in seen:  # a server repeating a tool: the first listing counts
                continue
            seen.add(name)
            tools.append(
                ListedTool(
                    name=name,
                    description=sent.get("description"),
                    input_schema=sent.get("inputSchema") or {},
                    annotations=sent.get("annotations"),
                    page=pages,
                )
            )
        if len(tools) > limits.max_tools:
            raise DiscoveryError(
                f"The server lists more than {limits.max_tools} tools "
                "(TRAITDECK_MCP_MAX_TOOLS); nothing was stored."
            )
        cursor = result.next_cursor
        if not cursor:
            return tools, pages


#: How a page's tools are serialised as sent (camelCase, unset fields left out).
_TOOLS: Final = TypeAdapter(list[Tool])


class _GarbageWatch(logging.Handler):
    """The SDK's stdio client logs a line it cannot parse and keeps waiting for an answer that
    will not come; this stops the run at the first such line instead of at the time limit."""

    def __init__(self, stop: _Stop) -> None:
        super().__init__(logging.ERROR)
        self.stop = stop

    def emit(self, record: logging.LogRecord) -> None:
        if "parse" in record.getMessage():
            error = record.exc_info[1] if record.exc_info else None
            seen = _first_line(error) if error is not None else record.getMessage()
            self.stop(f"The server wrote something that is not MCP: {seen}")


class _EndpointWatch(logging.Handler):
    """An SSE server whose ``endpoint`` event names another origin: the SDK's reader logs it and
    then waits on a stream nobody reads, so the run sat at its time limit (20 s) and said only
    that the server did not answer. This stops the run at once, saying where the server pointed
    (nothing is sent there: the SDK refuses it, and :class:`_HostGuard` would)."""

    PREFIX: Final = "Endpoint origin does not match connection origin: "

    def __init__(self, stop: _Stop, url: str) -> None:
        super().__init__(logging.ERROR)
        self.stop = stop
        self.url = url

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith(self.PREFIX):
            return
        try:
            named = _shown(httpx2.URL(message.removeprefix(self.PREFIX).strip()))
        except Exception:  # noqa: BLE001 (a URL the server made up: name no part of it)
            named = "an address Traitdeck cannot read"
        own = origin_text(url_origin(self.url)) if self.url else "the endpoint's"
        self.stop(
            f"The SSE server named {named} for the client's messages, another origin than "
            f"{own}: Traitdeck follows an SSE endpoint only within the server's origin; nothing "
            "was sent there."
        )


def _first_line(exc: BaseException) -> str:
    # An exception group (anyio task groups) hides the cause one level down.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(a, str) and a for a in value)


def parse_commands(raw: str) -> tuple[StdioCommand, ...]:
    """``TRAITDECK_MCP_STDIO_COMMANDS``: a JSON array whose entries are argv arrays of strings
    or ``{"argv": [...], "env": ["NAME", ...]}``; raises ``ValueError`` saying what is wrong."""
    if not raw.strip():
        return ()
    data = json.loads(raw)
    shape = (
        'TRAITDECK_MCP_STDIO_COMMANDS must be a JSON array of argv arrays or {"argv": [...], '
        '"env": ["NAME", ...]} objects.'
    )
    if not isinstance(data, list):
        raise ValueError(shape)
    commands = []
    for entry in data:
        if isinstance(entry, dict) and set(entry) <= {"argv", "env"}:
            argv, env = entry.get("argv"), entry.get("env", [])
        else:
            argv, env = entry, []
        if not _strings(argv) or not argv or not _strings(env):
            raise ValueError(shape)
        commands.append(StdioCommand(tuple(argv), frozenset(env)))
    return tuple(commands)


def parse_hosts(raw: str) -> frozenset[str]:
    """``TRAITDECK_MCP_HTTP_HOSTS``: comma-separated host names (any port) or origins
    (``scheme://host[:port]``, kept as ``scheme://host:port``); raises ``ValueError``."""
    hosts = set()
    for entry in (h.strip().lower() for h in raw.split(",")):
        if "://" in entry:
            hosts.add(origin_text(_parse_origin(entry, "TRAITDECK_MCP_HTTP_HOSTS")))
        elif entry:
            hosts.add(entry)
    return frozenset(hosts)


def _parse_origin(text: str, setting: str) -> Origin:
    try:
        url = httpx2.URL(text)
    except Exception:
        url = None
    if (
        url is None
        or url.scheme not in _DEFAULT_PORTS
        or not url.host
        or url.raw_path not in (b"", b"/")
        or url.query
        or url.userinfo
    ):
        raise ValueError(f"{setting}: {text!r} is not an origin like https://host:port.")
    return url_origin(url)


def parse_credentials(raw: str) -> dict[Origin, frozenset[str]]:
    """``TRAITDECK_MCP_CREDENTIALS``: a JSON object, origin -> list of environment variable
    names discovery may send there; raises ``ValueError`` saying what is wrong."""
    if not raw.strip():
        return {}
    data = json.loads(raw)
    if not isinstance(data, dict) or not all(_strings(names) for names in data.values()):
        raise ValueError(
            'TRAITDECK_MCP_CREDENTIALS must be a JSON object {"https://host:port": ["NAME", ...]}.'
        )
    credentials: dict[Origin, frozenset[str]] = {}
    for text, names in data.items():
        origin = _parse_origin(text.strip(), "TRAITDECK_MCP_CREDENTIALS")
        credentials[origin] = credentials.get(origin, frozenset()) | frozenset(names)
    return credentials


@gc_paused()  # thousands of tools: core.gc_pause says why
def manifest_entries(
    listing: Listing,
    *,
    alias: str,
    server_id: str,
    by: str,
    at: str,
    transport: str,
) -> dict[str, dict[str, Any]]:
    """The manifest entries of a listing: ``mcp.<alias>.<tool>`` → description, params,
    annotations as sent and where it came from. No ``tool_traits``: the runtime reads none
    from a server."""
    out: dict[str, dict[str, Any]] = {}
    for tool in listing.tools:
        entry: dict[str, Any] = {
            "description": tool.description or "",
            "params": _params(tool.input_schema),
            "source": {
                "kind": "mcp",
                "server_id": server_id,
                "transport": transport,
                "at": at,
                "by": by,
                "sdk": f"mcp {listing.sdk_version}",
                "page": tool.page,
                "credentials": "traitdeck",
            },
        }
        if tool.annotations is not None:
            entry["annotations"] = dict(tool.annotations)
        out[f"mcp.{alias}.{tool.name}"] = entry
    return out


def _params(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Parameter names, types and whether required, from the input schema (as the runtime's
    ``_params_from_schema`` reads them)."""
    props = schema.get("properties")
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    if not isinstance(props, Mapping):
        return []
    return [
        {
            "name": str(name),
            "type": str(spec.get("type", "")) if isinstance(spec, Mapping) else "",
            "required": name in needed,
        }
        for name, spec in props.items()
    ]
