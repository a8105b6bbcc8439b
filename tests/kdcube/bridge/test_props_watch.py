"""Config drift end to end: KDCube's recorded props-update message published on a real
``redis-server``, seen by the ``kdcube_bridge`` command (its own process), which tells a real
Traitdeck (daphne); Traitdeck reads the props from a server answering as KDCube's admin routes
answered when recorded and shows the change. Also: Redis going away (the fallback poll still
finds the change) and coming back (the listener reconnects)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from tests.kdcube import kdcube_replay
from tests.kdcube.bridge.conftest import (
    PYTHON,
    ROOT,
    RedisServer,
    Traitdeck,
    free_port,
    start_daphne,
    stop,
    wait_until,
)
from tests.kdcube.kdcube_replay import ReplayServer, exchange

CHANNEL = "kdcube:config:bundles:props:update:acme:demo"
MESSAGE = exchange("admin-changes-a-trait")["published"][0]
KDCUBE_ENV = {
    "TRAITDECK_KDCUBE_TENANT": "acme",
    "TRAITDECK_KDCUBE_PROJECT": "demo",
    "TRAITDECK_KDCUBE_BUNDLE": "workspace@2026-03-31-13-36",
    "TRAITDECK_KDCUBE_TOKEN": "td-rec-super-admin",
    "TRAITDECK_KDCUBE_POLL_S": "5",
}


@pytest.fixture
def kdcube() -> Iterator[ReplayServer]:
    yield from kdcube_replay.serve()


def reads(td: Traitdeck) -> list[dict[str, Any]]:
    code = (
        "import json; from kdcube.models import KDCubeRead as R; "
        "print(json.dumps([{'source': r.source, 'differs': r.differs, 'by': r.updated_by}"
        " for r in R.objects.order_by('id')]))"
    )
    lines = td.manage("shell", "--no-imports", "-c", code).strip().splitlines()
    out: list[dict[str, Any]] = json.loads(lines[-1] if lines else "[]")
    return out


def watching(server: RedisServer) -> bool:
    try:
        numsub = redis.Redis(port=server.port).pubsub_numsub(CHANNEL)
        return bool(numsub and numsub[0][1] >= 1)
    except redis.RedisError:
        return False


def test_the_bridge_sees_a_change_made_in_kdcube(
    traitdeck: Traitdeck, redis_server: RedisServer, kdcube: ReplayServer, tmp_path: Path
) -> None:
    kdcube.expect_always("drift-read")
    version = tmp_path / "version.yaml"
    version.write_text(yaml.safe_dump(exchange("push-read-back")["traitdeck"]["version"]))
    traitdeck.manage("policy", "import", str(version), "--publish", "--message", "v", "--yes")
    token = traitdeck.token("bridge", "events:write")
    env = {**traitdeck.env, **KDCUBE_ENV, "TRAITDECK_KDCUBE_URL": kdcube.url}
    # A daphne that knows the target (the fixture's serves the same database without one).
    bridge_log = tmp_path / "bridge.log"
    server_log = tmp_path / "daphne-kdcube.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    daphne = start_daphne(env, port, server_log)
    bridge = subprocess.Popen(
        [
            PYTHON,
            "manage.py",
            "kdcube_bridge",
            "--redis",
            redis_server.url,
            "--url",
            url,
            "--token",
            token,
            "--name",
            "test",
            "--stats-interval",
            "5",
        ],
        cwd=ROOT,
        env=env,
        stdout=bridge_log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    traitdeck.processes.extend([daphne, bridge])  # stopped by the fixture
    try:
        wait_until(lambda: watching(redis_server), what="the props watch to subscribe")
        redis_server.publish(MESSAGE["channel"], json.dumps(MESSAGE["payload"]))
        wait_until(
            lambda: any(r["source"] == "listener" for r in reads(traitdeck)),
            what="the listener's read",
        )
        first = next(r for r in reads(traitdeck) if r["source"] == "listener")
        assert first == {
            "source": "listener",
            "differs": ["agents.main"],
            "by": "ops-admin",
        }
        audit = traitdeck.manage(
            "shell",
            "--no-imports",
            "-c",
            "from audit.models import AuditEntry as A; "
            "print(A.objects.filter(action='kdcube.outside-change').count())",
        )
        assert audit.strip() == "1"

        # Redis goes away: the watcher reconnects with backoff, the poll still reads KDCube.
        redis_server.stop()
        polls = sum(r["source"] == "poll" for r in reads(traitdeck))
        wait_until(
            lambda: sum(r["source"] == "poll" for r in reads(traitdeck)) > polls,
            what="a fallback poll while Redis is down",
            timeout=30,
        )
        redis_server.start()
        wait_until(lambda: watching(redis_server), what="the props watch to reconnect")
        listened = sum(r["source"] == "listener" for r in reads(traitdeck))
        redis_server.publish(MESSAGE["channel"], json.dumps(MESSAGE["payload"]))
        wait_until(
            lambda: sum(r["source"] == "listener" for r in reads(traitdeck)) > listened,
            what="the listener after Redis came back",
        )
        assert "Redis unavailable" in bridge_log.read_text()
    finally:
        for process in (bridge, daphne):
            stop(process)


def test_it_does_not_watch_without_a_target(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from kdcube.bridge.management.commands.kdcube_bridge import props_watch

    for key in list(os.environ):
        if key.startswith("TRAITDECK_KDCUBE_"):
            monkeypatch.delenv(key)
    options = {"redis": "redis://127.0.0.1:1/0", "url": "http://127.0.0.1:1", "token": "t"}
    assert props_watch(options, stop=threading.Event(), say=print) is None
