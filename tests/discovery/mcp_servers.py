"""MCP servers for the discovery tests, written with the official SDK (low-level ``Server``, so a
listing can page). Run as ``python mcp_servers.py KIND [--http PORT]``: stdio by default,
streamable HTTP (uvicorn on 127.0.0.1:PORT) with ``--http``, over SSE with ``--sse``. With
``--redirect PATH STATUS LOCATION`` (HTTP and SSE) every request whose path starts with PATH is
answered STATUS with that ``Location`` instead (the rest is served as usual).

Kinds: ``mixed`` (reads and writes, some hints absent), ``paged`` (3 pages), ``silent`` (never
answers), ``garbage`` (writes non-protocol bytes), ``many`` (5,000 tools, one page; ``many:N``
for N), ``slow:S`` (lists ``mixed`` after S seconds), ``env`` (one tool ``env_NAME`` per variable
in its own environment: what the child was given).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def _tool(name: str, annotations: dict[str, object] | None = None) -> types.Tool:
    return types.Tool.model_validate(
        {
            "name": name,
            "description": f"{name} (a test tool)",
            "inputSchema": SCHEMA,
            **({"annotations": annotations} if annotations is not None else {}),
        }
    )


MIXED = [
    _tool("read_file", {"readOnlyHint": True}),
    _tool("list_dir", {"readOnlyHint": True, "openWorldHint": False}),
    _tool("write_file", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}),
    _tool("delete_file", {"destructiveHint": True}),
    _tool("stat"),  # no annotations at all: every hint is the spec's default
]
PAGED = [_tool(f"tool_{i}", {"readOnlyHint": True}) for i in range(7)]
PAGE = 3


def build(kind: str) -> Server:
    async def list_tools(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if kind == "mixed":
            return types.ListToolsResult(tools=MIXED)
        if kind == "env":
            import os

            return types.ListToolsResult(
                tools=[_tool(f"env_{name}") for name in sorted(os.environ)]
            )
        if kind == "paged":
            start = int(params.cursor) if params is not None and params.cursor else 0
            end = start + PAGE
            cursor = str(end) if end < len(PAGED) else None
            return types.ListToolsResult(tools=PAGED[start:end], next_cursor=cursor)
        if kind.startswith("slow:"):  # answers after that many seconds
            await anyio.sleep(float(kind.split(":", 1)[1]))
            return types.ListToolsResult(tools=MIXED)
        if kind.startswith("many"):
            count = int(kind.split(":", 1)[1]) if ":" in kind else 5000
            return types.ListToolsResult(
                tools=[_tool(f"t{i}", {"readOnlyHint": i % 2 == 0}) for i in range(count)]
            )
        raise ValueError(kind)

    return Server(f"traitdeck-test-{kind}", on_list_tools=list_tools)


def redirecting(app: Any) -> Any:
    """``app`` behind ``--redirect PATH STATUS LOCATION``, when given."""
    if "--redirect" not in sys.argv:
        return app
    at = sys.argv.index("--redirect")
    path, status, location = sys.argv[at + 1 : at + 4]

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(path):
            await app(scope, receive, send)
            return
        headers = [(b"location", location.encode()), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": int(status), "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    return wrapped


def serve_sse(server: Server, port: int) -> None:
    """The SDK's SSE transport as its module docstring wires it: a GET stream at ``/sse`` and
    the client's POSTs under ``/messages/``."""
    import uvicorn
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    transport = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options())
        return Response()

    app = Starlette(
        routes=[
            Route("/sse", endpoint=handle_sse, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
    )
    uvicorn.run(redirecting(app), host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    kind = sys.argv[1]
    if kind == "silent":
        sys.stdin.read()  # reads, never writes: the client waits forever
        return
    if kind == "garbage":
        sys.stdout.write('this is not json-rpc\n{"jsonrpc": 7}\n\x00\x01garbage\n')
        sys.stdout.flush()
        time.sleep(60)
        return
    server = build(kind)
    if "--sse" in sys.argv:
        serve_sse(server, int(sys.argv[sys.argv.index("--sse") + 1]))
        return
    if "--http" in sys.argv:
        import uvicorn

        port = int(sys.argv[sys.argv.index("--http") + 1])
        app = redirecting(server.streamable_http_app())
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
        return
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
