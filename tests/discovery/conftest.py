"""Real MCP servers (``mcp_servers.py``, official SDK) started by the tests: stdio argv lists and
streamable HTTP servers on free loopback ports, stopped at the end."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SERVERS = Path(__file__).with_name("mcp_servers.py")


def stdio_argv(kind: str) -> tuple[str, ...]:
    return (sys.executable, str(SERVERS), kind)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(transport: str, path: str) -> Iterator[Callable[[str], str]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(kind: str) -> str:
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, str(SERVERS), kind, f"--{transport}", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(process)
        deadline = time.monotonic() + 60  # importing the SDK on a busy machine
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return f"http://127.0.0.1:{port}{path}"
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the {kind} MCP server did not start on port {port}")

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def http_server() -> Iterator[Callable[[str], str]]:
    """Start a server of a kind over streamable HTTP; returns its URL."""
    yield from _serve("http", "/mcp")


@pytest.fixture
def sse_server() -> Iterator[Callable[[str], str]]:
    """Start a server of a kind over SSE (the SDK's SseServerTransport); returns its URL."""
    yield from _serve("sse", "/sse")
