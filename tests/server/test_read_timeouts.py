"""Read timeouts in the server layer (issue 34, item 9), a real ``python -m config.server``
process: headers that trickle in past ``TRAITDECK_HEADER_TIMEOUT_S`` get 408 and a closed
connection; a body that stops for longer than ``TRAITDECK_BODY_GAP_TIMEOUT_S`` is dropped, and
the application never runs for either. 40 slow-loris connections once stayed open 75 s."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.test_body_limit import serving

HEADERS_S = 2
GAP_S = 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    timeouts = {
        "TRAITDECK_HEADER_TIMEOUT_S": str(HEADERS_S),
        "TRAITDECK_BODY_GAP_TIMEOUT_S": str(GAP_S),
    }
    with serving(tmp_path, **timeouts) as running:
        yield running


def trickle(conn: socket.socket, data: bytes, every_s: float, until_s: float) -> bytes:
    """Send ``data`` a byte at a time until the server answers or closes; what it answered."""
    conn.settimeout(every_s)
    started = time.monotonic()
    for byte in data:
        try:
            conn.sendall(bytes([byte]))
            answer = conn.recv(4096)
            return answer  # an answer, or b"" when the server closed
        except TimeoutError:
            pass  # nothing yet: the next byte
        except (BrokenPipeError, ConnectionResetError):
            return b""
        assert time.monotonic() - started < until_s, "the server kept the connection open"
    raise AssertionError("all the bytes went out and the server never answered")


def test_headers_that_trickle_in_get_408_and_the_connection_closes(
    server: tuple[int, Path],
) -> None:
    port, log = server
    head = b"GET /slow HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n"
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        answer = trickle(conn, head, every_s=0.3, until_s=HEADERS_S + 10)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert time.monotonic() - started < HEADERS_S + 5
    assert log.read_text() == ""  # the application never ran


def test_a_body_that_stops_is_dropped_after_the_gap(server: tuple[int, Path]) -> None:
    port, log = server
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"POST /gap HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
        started = time.monotonic()
        conn.settimeout(GAP_S + 20)
        assert conn.recv(4096) == b""  # closed, unanswered
    assert GAP_S - 1 < time.monotonic() - started < GAP_S + 10
    assert log.read_text() == ""


def test_a_prompt_request_on_a_kept_alive_connection_still_works(
    server: tuple[int, Path],
) -> None:
    port, log = server
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        for path in ("/one", "/two"):
            conn.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc".encode()
            )
            answer = conn.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200"), answer
            time.sleep(HEADERS_S + 0.5)  # idle between requests is the gap's, not the header's
    assert log.read_text().splitlines() == ["POST /one 3", "POST /two 3"]
