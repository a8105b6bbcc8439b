"""daphne as production runs it (``python -m config.server``), a real process: a body over the
limit is answered 413 as it arrives — declared too long, or counted past the limit chunk by
chunk — and the application never sees a byte of it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

LIMIT = 64 * 1024
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def serving(tmp_path: Path, **env: str) -> Iterator[tuple[int, Path]]:
    """``python -m config.server`` on a free loopback port with the probe application and
    ``env`` added to the environment; its port and the probe's log."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "probe.log"
    log.touch()
    env = {**os.environ, "TRAITDECK_MAX_BODY_BYTES": str(LIMIT), "PROBE_LOG": str(log), **env}
    args = ["-b", "127.0.0.1", "-p", str(port), "tests.server.probe_app:application"]
    process = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
        [sys.executable, "-m", "config.server", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60  # importing Django on a busy machine
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        yield port, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)  # a graceful shutdown, seconds on a busy machine
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    with serving(tmp_path) as running:
        yield running


def exchange(port: int, head: str, chunks: list[bytes]) -> bytes:
    """Send the head, then the chunks (stopping when the server has closed), and read the
    answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head.encode())
        for chunk in chunks:
            try:
                conn.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        answer = b""
        try:
            while data := conn.recv(65536):
                answer += data
                if b"\r\n\r\n" in answer and not answer.startswith(b"HTTP/1.1 100"):
                    head_end = answer.index(b"\r\n\r\n")
                    length = [
                        int(line.split(b":")[1])
                        for line in answer[:head_end].split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ]
                    if length and len(answer) >= head_end + 4 + length[0]:
                        break
        except ConnectionResetError:
            pass
        return answer


def test_it_refuses_a_declared_length_over_the_limit_before_reading_it(
    server: tuple[int, Path],
) -> None:
    port, log = server
    head = f"POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: {LIMIT + 1}\r\n\r\n"
    answer = exchange(port, head, [])  # no body sent at all: the answer comes on the headers
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"over the limit of 65536 bytes" in answer
    assert log.read_text() == ""  # the application never ran


def test_it_refuses_chunks_once_they_pass_the_limit(server: tuple[int, Path]) -> None:
    port, log = server
    head = "POST /api/v1/events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    piece = b"a" * 16384
    chunks = [b"4000\r\n" + piece + b"\r\n"] * 8 + [b"0\r\n\r\n"]  # 128 KiB, twice the limit
    answer = exchange(port, head, chunks)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert log.read_text() == ""


def test_a_body_at_the_limit_reaches_the_application_whole(server: tuple[int, Path]) -> None:
    port, log = server
    head = f"POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: {LIMIT}\r\nConnection: close\r\n\r\n"
    answer = exchange(port, head, [b"b" * LIMIT])
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    chunked = (
        "POST /ok2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    answer = exchange(port, chunked, [b"4000\r\n" + b"c" * 16384 + b"\r\n", b"0\r\n\r\n"])
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert log.read_text().splitlines() == [f"POST /ok {LIMIT}", "POST /ok2 16384"]
