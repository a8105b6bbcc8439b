"""Real MCP servers (``mcp_servers.py``, official SDK) started by the tests: stdio argv lists and
streamable HTTP servers on free loopback ports, stopped at the end."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SERVERS = Path(__file__).with_name("mcp_servers.py")


def stdio_argv(kind: str) -> tuple[str, ...]:
    return (sys.executable, str(SERVERS), kind)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(transport: str, path: str) -> Iterator[Callable[..., str]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(kind: str, *extra: str) -> str:
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, str(SERVERS), kind, f"--{transport}", str(port), *extra],
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
def http_server() -> Iterator[Callable[..., str]]:
    """Start a server of a kind over streamable HTTP (more arguments: ``mcp_servers.py``'s
    options); returns its URL."""
    yield from _serve("http", "/mcp")


@pytest.fixture
def sse_server() -> Iterator[Callable[..., str]]:
    """Start a server of a kind over SSE (the SDK's SseServerTransport); returns its URL."""
    yield from _serve("sse", "/sse")


@pytest.fixture
def bystander() -> Iterator[Callable[[str], tuple[int, Callable[[], bool]]]]:
    """A listening socket on a loopback address (``127.0.0.2``: another host than ``127.0.0.1``)
    that serves nothing: returns its port and whether anything has connected to it."""
    opened: list[socket.socket] = []

    def listen(host: str) -> tuple[int, Callable[[], bool]]:
        sock = socket.socket()
        sock.bind((host, 0))
        sock.listen()
        sock.setblocking(False)
        opened.append(sock)

        def reached() -> bool:
            try:
                conn, _ = sock.accept()
            except BlockingIOError:
                return False
            conn.close()
            return True

        return int(sock.getsockname()[1]), reached

    yield listen
    for sock in opened:
        sock.close()


@pytest.fixture
def header_listener() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A real HTTP listener on 127.0.0.1 that records the headers of every request it gets
    (and answers 404): its base URL and the list it records into."""
    seen: list[dict[str, str]] = []

    class Record(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


@dataclass
class Listener:
    """A real HTTP listener on 127.0.0.1 (``listener`` fixture): its base URL and the headers of
    every request it got, in order."""

    url: str
    seen: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
def listener() -> Iterator[Callable[..., Listener]]:
    """Start listeners that record every request's headers and answer as told: ``404`` (no MCP
    server), ``redirect=URL`` (307 to URL, or ``status``), or ``endpoint=URL`` (an SSE stream
    whose ``endpoint`` event names URL for the client's POSTs, as an MCP SSE server's does)."""
    servers: list[ThreadingHTTPServer] = []

    def start(*, redirect: str = "", status: int = 307, endpoint: str = "") -> Listener:
        made = Listener(url="")

        class Answer(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                made.seen.append({k.lower(): v for k, v in self.headers.items()})
                if redirect:
                    self.send_response(status)
                    self.send_header("Location", redirect)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif endpoint and self.command == "GET":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-store")
                    self.end_headers()
                    self.wfile.write(f"event: endpoint\ndata: {endpoint}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(3)  # the stream stays open while the client would POST
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.url = f"http://127.0.0.1:{server.server_address[1]}"
        return made

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
