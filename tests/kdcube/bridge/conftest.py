"""Real components for the bridge's end-to-end tests: a throw-away ``redis-server`` on a free
port (stopped and started again by the fault test), a real daphne serving Traitdeck on a SQLite
file with the sample policy, and the ``kdcube_bridge`` command as a separate process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.servers import daphne_command, server_env, start_server, stop

ROOT = Path(__file__).resolve().parents[3]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Any, *, what: str, timeout: float = 120) -> None:
    """Poll ``check`` until it is true; a ceiling, not a wait: on a machine whose cores were busy
    a process start-up alone (Django imported, then Redis subscribed) took over 45 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class RedisServer:
    port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            message = "redis-server not found (apt-get install redis-server; make test does)"
            if os.environ.get("CI") == "true":
                pytest.fail(message)  # in CI a missing server is a failure, never a skip
            pytest.skip(message)
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.answers, what="redis-server to answer")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def publish(self, channel: str, payload: str) -> int:
        return int(redis.Redis(port=self.port).publish(channel, payload))


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    yield server
    server.stop()


@dataclass
class Traitdeck:
    url: str
    env: dict[str, str]
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def token(self, name: str, *scopes: str) -> str:
        args = [f"--scope={s}" for s in scopes]
        return self.manage("runtime_token", "create", name, *args).strip()

    def get(self, path: str, token: str) -> Any:
        response = httpx.get(
            self.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        assert response.status_code == 200, response.text
        return response.json()


def start_daphne(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """A real daphne serving Traitdeck on 127.0.0.1:``port`` with ``env``, logging to ``log``;
    returns once it answers (a client started earlier may give up on a server not yet up: the
    bridge tells Traitdeck of a props change once)."""
    return start_server(daphne_command(port), env=env, url=f"http://127.0.0.1:{port}", log=log)


@pytest.fixture
def traitdeck(tmp_path: Path) -> Iterator[Traitdeck]:
    port = free_port()
    env = server_env(tmp_path / "db.sqlite3", "bridge")
    server = Traitdeck(url=f"http://127.0.0.1:{port}", env=env)
    server.manage("migrate", "--no-input", "-v0")
    server.manage("load_sample_policy")
    daphne = start_daphne(env, port, tmp_path / "daphne.log")
    yield server
    for process in [*server.processes, daphne]:
        stop(process)


def start_bridge(
    traitdeck: Traitdeck,
    redis_url: str,
    token: str,
    log: Path,
    settings: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    """The ``kdcube_bridge`` command in its own process (``settings``: environment variables
    added to the server's, e.g. ``TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S``)."""
    process = subprocess.Popen(
        [
            PYTHON,
            "manage.py",
            "kdcube_bridge",
            "--redis",
            redis_url,
            "--url",
            traitdeck.url,
            "--token",
            token,
            "--name",
            "test",
            "--stats-interval",
            "0.5",
            "--flush-interval",
            "0.2",
        ],
        cwd=ROOT,
        env={**traitdeck.env, **(settings or {})},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    traitdeck.processes.append(process)
    return process
