"""The real image (``Containerfile``), built with podman from a local Debian trixie base
(``scripts/container-base``), its containers run with host networking against the throw-away
PostgreSQL and redis-server of ``make test-container`` (scripts/test-scale starts them): migrate,
the web workers answer ``/api/v1/health`` (and the image's HEALTHCHECK passes) and serve a static
file, a runtime posts events, the bridge container reads KDCube envelopes from Redis into rounds,
and a publish pushes the version to the recorded KDCube stand-in.

Outside CI the group skips, saying why, where podman cannot run (not root, not installed); with
``CI=true`` it fails instead. The times (base image, build, web start-up) go to
``.test-artifacts/container-times.txt``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from conformance import fixtures
from tests.kdcube import kdcube_replay
from tests.markup import find_all
from tests.metrics.known import canon, known_events, samples

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "deploy" / "podman" / "containers.conf"
BASE = os.environ.get("TRAITDECK_CONTAINER_BASE", "localhost/trixie-py:base")
IMAGE = "localhost/traitdeck:test"
TIMES = ROOT / ".test-artifacts" / "container-times.txt"
ENVELOPES = fixtures.read("kdcube-envelopes")
KDCUBE_TOKEN = "td-rec-super-admin"


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def podman(
    *args: str, check: bool = True, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["podman", *args],
        env={**os.environ, "CONTAINERS_CONF": str(CONF)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert done.returncode == 0, f"podman {' '.join(args[:3])}…: {done.stderr[-3000:]}"
    return done


def _note(line: str) -> None:
    TIMES.parent.mkdir(exist_ok=True)
    with TIMES.open("a") as out:
        out.write(line + "\n")
    print(line)


@pytest.fixture(scope="module")
def image() -> str:
    """Build the image (the base is made once and kept by podman between runs)."""
    if shutil.which("podman") is None:
        _unavailable("podman is not installed (scripts/ensure-system-deps container)")
    if os.geteuid() != 0:
        _unavailable("the container tests run podman as root (runc, host networking)")
    info = podman("info", check=False, timeout=120)
    if info.returncode != 0:
        _unavailable(f"podman cannot run here: {info.stderr.strip()[-500:]}")
    TIMES.unlink(missing_ok=True)
    started = time.monotonic()
    base = subprocess.run(
        [str(ROOT / "scripts" / "container-base"), BASE],
        env={**os.environ, "CONTAINERS_CONF": str(CONF)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert base.returncode == 0, base.stderr
    _note(f"base image: {time.monotonic() - started:.1f} s ({base.stdout.strip()})")
    started = time.monotonic()
    podman(
        "build",
        "--format",
        "docker",
        "--network=host",
        "-v",
        "/etc/ssl/certs:/etc/ssl/certs:ro",
        "--env",
        "PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
        "--build-arg",
        f"BASE={BASE}",
        "-t",
        IMAGE,
        "-f",
        "Containerfile",
        str(ROOT),
    )
    size = int(podman("image", "inspect", IMAGE, "--format", "{{.Size}}").stdout.strip())
    _note(f"image build: {time.monotonic() - started:.1f} s; image size {size / 1e6:.0f} MB")
    return IMAGE


def _database_and_redis() -> tuple[str, str]:
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if not (database_url.startswith("postgres") and redis_url.startswith("redis")):
        _unavailable(
            "needs DATABASE_URL=postgres://… and REDIS_URL=redis://… (make test-container)"
        )
    return database_url, redis_url


@dataclass
class Deployment:
    image: str
    env: dict[str, str]
    secrets_dir: Path
    database_url: str
    redis_url: str
    port: int
    names: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _args(self, extra: dict[str, str]) -> list[str]:
        args = ["-v", f"{self.secrets_dir}:/run/secrets:ro"]
        for key, value in {**self.env, **extra}.items():
            args += ["-e", f"{key}={value}"]
        return args

    def once(self, *command: str, **extra: str) -> str:
        """A one-shot command in a fresh container; its standard output."""
        done = podman("run", "--rm", *self._args(extra), self.image, *command)
        return done.stdout.strip()

    def start(self, name: str, *command: str, **extra: str) -> str:
        full = f"td-test-{name}-{uuid.uuid4().hex[:6]}"
        podman("run", "-d", "--name", full, *self._args(extra), self.image, *command)
        self.names.append(full)
        return full

    def logs(self, name: str) -> str:
        done = podman("logs", name, check=False)
        return done.stdout + done.stderr

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            return conn.execute(query, params).fetchall()


def wait_until(check: Any, *, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def deployment(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    database_url, redis_url = _database_and_redis()
    secrets_dir = tmp_path_factory.mktemp("secrets")
    secrets_dir.chmod(0o755)  # the image's user (uid 10001) reads the mounted files
    for name, value in {
        "secret_key": secrets.token_urlsafe(50),
        "kdcube_token": KDCUBE_TOKEN,
        "database_url": database_url,
    }.items():
        path = secrets_dir / name
        path.write_text(value + "\n")
        path.chmod(0o644)
    for server in kdcube_replay.serve():
        env = {
            "SECRET_KEY_FILE": "/run/secrets/secret_key",
            "DATABASE_URL_FILE": "/run/secrets/database_url",
            "REDIS_URL": redis_url,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "TRAITDECK_KDCUBE_URL": server.url,
            "TRAITDECK_KDCUBE_TENANT": "acme",
            "TRAITDECK_KDCUBE_PROJECT": "demo",
            "TRAITDECK_KDCUBE_BUNDLE": "workspace@2026-03-31-13-36",
            "TRAITDECK_KDCUBE_TOKEN_FILE": "/run/secrets/kdcube_token",
            "TRAITDECK_KDCUBE_TIMEOUT_S": "30",
        }
        deployment = Deployment(image, env, secrets_dir, database_url, redis_url, _free_port())
        deployment.server = server  # type: ignore[attr-defined]
        try:
            yield deployment
        finally:
            for name in deployment.names:
                podman("rm", "-f", "-t", "5", name, check=False)


def test_the_image_runs_migrate_web_and_bridge_against_postgresql_and_redis(
    deployment: Deployment,
) -> None:
    d = deployment
    server: kdcube_replay.ReplayServer = d.server  # type: ignore[attr-defined]
    # The image itself: a non-root user, no compiler, the healthcheck kept (--format docker).
    inspected = json.loads(podman("image", "inspect", d.image).stdout)[0]
    assert inspected["Config"]["User"] == "traitdeck"
    assert "/api/v1/health" in " ".join(inspected["Healthcheck"]["Test"])
    assert d.once("sh", "-c", "command -v gcc cc || echo none") == "none"

    d.once("python", "manage.py", "migrate", "--no-input", "-v0")
    assert ("observe_round",) in d.sql(
        "SELECT tablename FROM pg_tables WHERE tablename = 'observe_round'"
    )
    writer = d.once(
        "python", "manage.py", "runtime_token", "create", "runtime", "--scope", "events:write"
    )
    reader = d.once(
        "python", "manage.py", "runtime_token", "create", "prom", "--scope", "metrics:read"
    )
    (d.secrets_dir / "bridge_token").write_text(
        d.once(
            "python", "manage.py", "runtime_token", "create", "bridge", "--scope", "events:write"
        )
    )
    (d.secrets_dir / "bridge_token").chmod(0o644)

    # The web workers (the image's default command) on the host's network.
    started = time.monotonic()
    web = d.start("web", PORT=str(d.port))

    def healthy() -> bool:
        try:
            return httpx.get(f"{d.url}/api/v1/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            assert podman("inspect", web, "--format", "{{.State.Running}}").stdout.strip() == (
                "true"
            ), d.logs(web)
            return False

    wait_until(healthy, what="the web container to answer", timeout=120)
    _note(
        f"web start-up (container start to /api/v1/health 200): {time.monotonic() - started:.1f} s"
    )
    assert podman("healthcheck", "run", web, check=False).returncode == 0, d.logs(web)
    # A static file, collected into the image at build time, served by whitenoise (DEBUG off).
    login = httpx.get(f"{d.url}/accounts/login/", timeout=30)
    assert login.status_code == 200
    hrefs = [link.attrs["href"] for link in find_all(login.text, "link", rel="stylesheet")]
    css = [href for href in hrefs if href.startswith("/static/") and href.endswith(".css")]
    assert css, login.text[:500]
    static = httpx.get(f"{d.url}{css[0]}", timeout=30)
    assert static.status_code == 200
    assert static.headers["content-type"].startswith("text/css")

    # A runtime posts events.
    events = known_events("container")
    posted = httpx.post(
        f"{d.url}/api/v1/events",
        content=json.dumps({"events": events}),
        headers={"Authorization": f"Bearer {writer}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert posted.status_code == 200, posted.text
    assert posted.json() == {"accepted": len(events), "duplicates": 0, "rejected": []}

    # A publish pushes the version to KDCube (the recorded stand-in): pull first (Traitdeck
    # never overwrites props it has not read), then publish.
    server.expect("push-read")
    d.once("python", "manage.py", "policy", "pull", "--yes")
    # The version the recording wrote (JSON is YAML), mounted beside the secrets.
    version = kdcube_replay.exchange("push-read-back")["traitdeck"]["version"]
    (d.secrets_dir / "version.yaml").write_text(json.dumps(version))
    (d.secrets_dir / "version.yaml").chmod(0o644)
    d.once("python", "manage.py", "policy", "import", "/run/secrets/version.yaml")
    server.expect("push-read", "push-write", "push-read-back")
    d.once("python", "manage.py", "policy", "publish", "--message", "from the image", "--yes")
    assert server.served[-3:] == ["push-read", "push-write", "push-read-back"]
    assert d.sql("SELECT version, status FROM policy_kdcubepush") == [(1, "pushed")]

    # The bridge container reads KDCube's envelopes from Redis into rounds.
    bridge = d.start(
        "bridge",
        "python",
        "manage.py",
        "kdcube_bridge",
        "--url",
        d.url,
        "--name",
        "kdcube",
        "--stats-interval",
        "1",
        KDCUBE_REDIS_URL=d.redis_url,
        TRAITDECK_TOKEN_FILE="/run/secrets/bridge_token",
    )
    client = redis.Redis.from_url(d.redis_url)
    case = ENVELOPES["cases"][0]
    turn = case["input"]["round"]["turn_id"]

    def bridged() -> bool:
        assert podman("inspect", bridge, "--format", "{{.State.Running}}").stdout.strip() == (
            "true"
        ), d.logs(bridge)
        # Published until the bridge is subscribed: event ids come from the envelopes, so a
        # repeat is stored once.
        for message in case["published"]:
            client.publish(message["channel"], json.dumps(message["payload"]))
        return bool(d.sql("SELECT 1 FROM observe_round WHERE turn_id = %s", turn))

    wait_until(bridged, what=f"the bridged round {turn}", timeout=120)

    # The metrics, from the web container, say all of it.
    def reported() -> dict[str, float]:
        response = httpx.get(
            f"{d.url}/api/v1/metrics", headers={"Authorization": f"Bearer {reader}"}, timeout=30
        )
        assert response.status_code == 200, response.text
        return samples(response.text)

    wait_until(
        lambda: canon('traitdeck_bridge_buffered_events{bridge="kdcube"}') in reported(),
        what="the bridge's report",
    )
    found = reported()
    assert found[canon('traitdeck_ingest_events_total{result="accepted"}')] > len(events)
    assert found["traitdeck_policy_version"] == 1
    assert found[canon('traitdeck_kdcube_push{status="pushed"}')] == 1
