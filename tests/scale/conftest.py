"""The scale-out profile with real processes: two daphne workers sharing one PostgreSQL database
and one Redis, started from the same settings an operator uses (README "Running in production":
DEBUG=0, collectstatic, whitenoise, DATABASE_URL, REDIS_URL).

Run by ``make test-scale`` (scripts/test-scale), which starts the throw-away servers and exports
``DATABASE_URL`` / ``REDIS_URL``; this group runs without pytest-django, like the browser group.
Each session gets a database of its own on that server.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.servers import daphne_command, start_server, stop

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "policy" / "sample" / "sample-policy.yaml"
#: The workers' own re-read of the database is stretched far beyond every wait in these tests:
#: whatever a websocket receives in time came through Redis.
TICK_SECONDS = "600"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _require_servers() -> tuple[str, str]:
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if database_url.startswith("postgres") and redis_url.startswith("redis"):
        return database_url, redis_url
    message = (
        "tests/scale needs DATABASE_URL=postgres://… and REDIS_URL=redis://… (make test-scale)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class Worker:
    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Cluster:
    env: dict[str, str]
    database_url: str
    redis_port: int
    workers: list[Worker]
    token: str
    username: str
    password: str
    workdir: Path
    _sessions: dict[int, httpx.Cookies] = field(default_factory=dict)

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stderr}"
        return done

    def post_events(self, worker: Worker, events: list[dict[str, Any]]) -> dict[str, Any]:
        """POST a batch as a runtime does; a 503 (store busy) is retried as its answer says."""
        for _ in range(20):
            response = httpx.post(
                f"{worker.url}/api/v1/events",
                content=json.dumps({"events": events}),
                headers={
                    "Authorization": f"Bearer {self.token}",
                    "Content-Type": "application/json",
                },
                timeout=60,
            )
            if response.status_code == 503:
                time.sleep(float(response.headers.get("Retry-After", "1")) / 4)
                continue
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            return body
        raise AssertionError(f"{worker.name} answered 503 twenty times")

    def session_cookies(self, worker: Worker) -> httpx.Cookies:
        """Log in through the login form of ``worker`` (once per worker)."""
        if worker.port not in self._sessions:
            with httpx.Client(base_url=worker.url, timeout=30) as client:
                client.get("/accounts/login/").raise_for_status()
                answer = client.post(
                    "/accounts/login/",
                    data={
                        "username": self.username,
                        "password": self.password,
                        "csrfmiddlewaretoken": client.cookies["csrftoken"],
                    },
                )
                assert answer.status_code == 302, answer.text[:500]
                self._sessions[worker.port] = client.cookies
        return self._sessions[worker.port]

    def live_socket(self, worker: Worker, query: str = "") -> Any:
        """A websocket to ``/ws/live/`` of ``worker``, as the live page opens it."""
        cookies = self.session_cookies(worker)
        cookie = "; ".join(f"{name}={value}" for name, value in cookies.items())
        return connect(
            f"ws://127.0.0.1:{worker.port}/ws/live/{query}",
            additional_headers={"Cookie": cookie, "Origin": worker.url},
            open_timeout=30,
        )

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, autocommit=True) as connection:
            return connection.execute(query, params).fetchall()

    # --- Redis, for the fault test -------------------------------------------------------------

    def redis_stop(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "shutdown", "nosave"],
            capture_output=True,
            check=False,
        )
        wait_until(lambda: not self._redis_answers(), what="redis-server to stop")

    def redis_start(self) -> None:
        directory = os.environ["TRAITDECK_SCALE_REDIS_DIR"]
        subprocess.run(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.redis_port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--pidfile",
                f"{directory}/redis.pid",
                "--logfile",
                f"{directory}/redis.log",
                "--dir",
                directory,
            ],
            check=True,
        )
        wait_until(self._redis_answers, what="redis-server to answer")

    def _redis_answers(self) -> bool:
        done = subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True, text=True
        )
        return done.stdout.strip() == "PONG"


def wait_until(check: Any, *, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


async def receive_until(socket_: ClientConnection, predicate: Any, *, within: float) -> list[str]:
    """Messages until one satisfies ``predicate`` (AssertionError after ``within`` seconds)."""
    seen: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise AssertionError(f"nothing matching arrived within {within} s; got {seen!r:.800}")
        try:
            message = await asyncio.wait_for(socket_.recv(), left)
        except TimeoutError:
            continue
        text = message if isinstance(message, str) else message.decode()
        seen.append(text)
        if predicate(text):
            return seen


def versions_in(message: str) -> list[int]:
    """The round versions (``data-version``) of the cards a stream message carries."""
    return [int(v) for v in re.findall(r'data-version="(\d+)"', message)]


def simulated_rounds(count: int, *, seed: int | None = None) -> list[list[dict[str, Any]]]:
    """``count`` realistic rounds of the sample policy from the runtime simulator (pure domain),
    with turn ids and event ids of their own (a random seed)."""
    from policy.domain.yaml_io import load_policy
    from simulator.runtime import Simulator

    loaded = load_policy(SAMPLE.read_text())
    assert loaded.data is not None
    simulator = Simulator(loaded.data, seed=seed if seed is not None else secrets.randbits(32))
    start = datetime.now(UTC) - timedelta(minutes=5)
    rounds = [simulator.next_round(start + timedelta(seconds=i))[1] for i in range(count)]
    # A turn can span several rounds (iterations): give each round a turn id of its own, so a
    # test can look for exactly that round's card.
    for events in rounds:
        turn_id = f"scale-{secrets.token_hex(6)}"
        for event in events:
            event["turn_id"] = turn_id
    return rounds


def _create_database(server_url: str) -> str:
    name = f"scale_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    parts = urllib.parse.urlsplit(server_url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def _drop_database(server_url: str, database_url: str) -> None:
    name = urllib.parse.urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _start(worker: Worker, env: dict[str, str]) -> None:
    command = daphne_command(worker.port, "--proxy-headers")
    worker.process = start_server(command, env=env, url=worker.url, log=worker.log)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    server_url, redis_url = _require_servers()
    workdir = tmp_path_factory.mktemp("scale")
    database_url = _create_database(server_url)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "STATIC_ROOT": str(workdir / "static"),
        "TRAITDECK_LIVE_TICK_SECONDS": TICK_SECONDS,
        "LOG_LEVEL": "INFO",
    }
    env.pop("TRAITDECK_SERVE_STATIC", None)  # whitenoise serves the collected files
    env.pop("TRAITDECK_DEMO", None)
    username, password = "scale-admin", secrets.token_urlsafe(16)
    cluster = Cluster(
        env=env,
        database_url=database_url,
        redis_port=urllib.parse.urlsplit(redis_url).port or 6379,
        workers=[],
        token="",
        username=username,
        password=password,
        workdir=workdir,
    )
    cluster.manage("migrate", "--no-input", "-v0")
    cluster.manage("collectstatic", "--no-input", "-v0")
    cluster.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_superuser({username!r}, password={password!r})",
    )
    token = cluster.manage("runtime_token", "create", "scale-runtime", "--scope", "events:write")
    cluster.token = token.stdout.strip()
    cluster.workers = [
        Worker("A", _free_port(), workdir / "worker-a.log"),
        Worker("B", _free_port(), workdir / "worker-b.log"),
    ]
    try:
        for worker in cluster.workers:
            _start(worker, env)
        yield cluster
    finally:
        for worker in cluster.workers:
            stop(worker.process)
        _drop_database(server_url, database_url)
