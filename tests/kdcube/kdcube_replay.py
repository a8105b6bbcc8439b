"""A real HTTP server on loopback that answers as KDCube's admin props routes answered when
recorded (``tests/conformance/fixtures/kdcube-props.json``, ``python -m conformance.kdcube_props``).

It is given the recorded exchanges a test expects, in order, and answers each request with the
recorded answer only when the request is the recorded one (method, path, query, which token, JSON
body); anything else is answered 599 and kept in ``unexpected``, which the fixture using it
asserts empty. Faults a recording cannot hold (a slow answer, a 5xx, a dropped connection) are
injected by name, and only where a test asks for them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from conformance import fixtures

NAME = "kdcube-props"
#: The recorded server's tokens (test-only, see ``conformance.kdcube_admin.TOKENS``).
TOKENS = {
    "td-rec-super-admin": "admin",
    "td-rec-ops-admin": "ops",
    "td-rec-registered-user": "viewer",
}


def recorded() -> dict[str, Any]:
    return fixtures.read(NAME)


def exchange(case_id: str) -> dict[str, Any]:
    for case in recorded()["cases"]:
        if case["id"] == case_id:
            return dict(case)
    raise KeyError(case_id)


class ReplayServer:
    def __init__(self) -> None:
        self.expected: list[dict[str, Any]] = []
        #: Exchanges answered any number of times (a poll asks the same again and again).
        self.always: list[dict[str, Any]] = []
        self.unexpected: list[str] = []
        self.served: list[str] = []
        #: name → how the next request is answered instead of the recording ("slow", "500", "drop").
        self.fault: str | None = None
        self.slow_s = 2.0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _answer(self, method: str) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                header = self.headers.get("Authorization", "")
                token = header[7:] if header.startswith("Bearer ") else ""
                auth = TOKENS.get(token, "invalid" if token else "none")
                request = {
                    "method": method,
                    "path": split.path,
                    "query": dict(parse_qsl(split.query)),
                    "auth": auth,
                    "json": body,
                }
                status, answer = server.answer(request)
                if status == 0:  # drop the connection without an answer
                    self.close_connection = True
                    return
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def expect(self, *case_ids: str) -> None:
        with self._lock:
            self.expected.extend(exchange(c) for c in case_ids)

    def expect_always(self, case_id: str) -> None:
        with self._lock:
            self.always.append(exchange(case_id))

    def answer(self, request: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            fault, self.fault = self.fault, None
        if fault == "slow":
            time.sleep(self.slow_s)
        elif fault == "drop":
            return 0, None
        elif fault is not None:
            return int(fault), {"detail": "Internal Server Error (injected)"}
        with self._lock:
            if self.expected and self.expected[0]["request"] == request:
                case = self.expected.pop(0)
                self.served.append(case["id"])
                return case["response"]["status"], case["response"]["json"]
            for case in self.always:
                if case["request"] == request:
                    self.served.append(case["id"])
                    return case["response"]["status"], case["response"]["json"]
            self.unexpected.append(json.dumps(request, sort_keys=True)[:500])
        return 599, {"detail": "not in the recording"}

    def start(self) -> ReplayServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve() -> Iterator[ReplayServer]:
    """For a pytest fixture: yields a started server and checks nothing unrecorded was asked."""
    server = ReplayServer().start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.unexpected, "requests the recording does not hold:\n" + "\n".join(
        server.unexpected
    )
