"""The push guard with the bridge listening (issue 33): another admin's change, seen by the
listener, is not cleared by that read. A real daphne and the ``kdcube_bridge`` command on a real
``redis-server``; KDCube answered from its own recorded admin routes."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
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
from tests.kdcube.bridge.test_props_watch import KDCUBE_ENV, MESSAGE, reads, watching
from tests.kdcube.kdcube_replay import ReplayServer, exchange

TRAIT = "`main` → connection `web` → `web_search`: strategy [exploration] → [exploitation]"


@pytest.fixture
def kdcube() -> Iterator[ReplayServer]:
    yield from kdcube_replay.serve()


def manage(traitdeck: Traitdeck, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=traitdeck.env, capture_output=True, text=True
    )


def test_a_push_after_the_listener_saw_an_outside_change_is_refused_naming_the_trait(
    traitdeck: Traitdeck, redis_server: RedisServer, kdcube: ReplayServer, tmp_path: Path
) -> None:
    version = tmp_path / "version.yaml"
    version.write_text(yaml.safe_dump(exchange("push-read-back")["traitdeck"]["version"]))
    traitdeck.manage("policy", "import", str(version), "--publish", "--message", "v", "--yes")
    # No fallback poll during the test: only the listener reads.
    traitdeck.env.update({**KDCUBE_ENV, "TRAITDECK_KDCUBE_URL": kdcube.url})
    traitdeck.env["TRAITDECK_KDCUBE_POLL_S"] = "600"
    kdcube.expect("push-read", "push-write", "push-read-back")
    pushed = manage(traitdeck, "policy", "push", "--overwrite")
    assert "pushed version 1" in pushed.stdout, pushed.stderr

    token = traitdeck.token("bridge", "events:write")
    port = free_port()
    daphne = start_daphne(traitdeck.env, port, tmp_path / "daphne-kdcube.log")
    bridge = subprocess.Popen(
        [
            PYTHON,
            "manage.py",
            "kdcube_bridge",
            "--redis",
            redis_server.url,
            "--url",
            f"http://127.0.0.1:{port}",
            "--token",
            token,
            "--name",
            "test",
        ],
        cwd=ROOT,
        env=traitdeck.env,
        stdout=(tmp_path / "bridge.log").open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    traitdeck.processes.extend([daphne, bridge])
    try:
        wait_until(lambda: watching(redis_server), what="the props watch to subscribe")
        # Another super-admin changes web_search through KDCube; the listener reads it.
        kdcube.expect("drift-read")
        redis_server.publish(MESSAGE["channel"], json.dumps(MESSAGE["payload"]))
        wait_until(
            lambda: any(r["source"] == "listener" for r in reads(traitdeck)),
            what="the listener's read",
        )
        # The read that found the change did not clear it: a plain push is refused, by name.
        kdcube.expect("drift-read")
        refused = manage(traitdeck, "policy", "push")
        assert refused.returncode == 1
        assert "refused" in refused.stderr
        assert TRAIT in refused.stderr
        assert kdcube.served[-2:] == ["drift-read", "drift-read"]  # nothing written
        audit = traitdeck.manage(
            "shell",
            "--no-imports",
            "-c",
            "from audit.models import AuditEntry as A; "
            "e = A.objects.get(action='kdcube.outside-change'); print(e.actor_name, e.message)",
        )
        assert audit.startswith("kdcube changed in KDCube at ")
        assert "(reported by KDCube as `ops-admin`)" in audit
        assert TRAIT in audit
    finally:
        for process in (bridge, daphne):
            stop(process)


def published(traitdeck: Traitdeck, kdcube: ReplayServer, tmp_path: Path) -> None:
    """Version 1 published (before the target is known: no push), then the target set."""
    version = tmp_path / "version.yaml"
    version.write_text(yaml.safe_dump(exchange("push-read-back")["traitdeck"]["version"]))
    traitdeck.manage("policy", "import", str(version), "--publish", "--message", "v", "--yes")
    traitdeck.env.update({**KDCUBE_ENV, "TRAITDECK_KDCUBE_URL": kdcube.url})
    traitdeck.env["TRAITDECK_KDCUBE_POLL_S"] = "600"


def test_two_pushes_at_once_are_serialized(
    traitdeck: Traitdeck, kdcube: ReplayServer, tmp_path: Path
) -> None:
    published(traitdeck, kdcube, tmp_path)
    # The first push (overwrite) is slow to read: it holds the bundle while the second (plain)
    # starts. The second waits, then compares with what the first wrote and finds the outside
    # change: refused, never interleaved (today both read at once and the writes cross).
    kdcube.expect("push-read", "push-write", "push-read-back", "drift-read")
    kdcube.slow_s = 6.0
    kdcube.fault = "slow"
    command = [PYTHON, "manage.py", "policy", "push"]
    pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    first = subprocess.Popen([*command, "--overwrite"], cwd=ROOT, env=traitdeck.env, **pipes)
    wait_until(lambda: kdcube.fault is None, what="the first push's read")
    second = subprocess.Popen(command, cwd=ROOT, env=traitdeck.env, **pipes)
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert first.returncode == 0, err1
    assert "pushed version 1" in out1
    assert second.returncode == 1, out2
    assert "refused" in err2
    assert TRAIT in err2
    assert kdcube.served == ["push-read", "push-write", "push-read-back", "drift-read"]


def test_a_burst_of_bridge_calls_reads_kdcube_at_most_twice(
    traitdeck: Traitdeck, kdcube: ReplayServer, tmp_path: Path
) -> None:
    published(traitdeck, kdcube, tmp_path)
    kdcube.expect_always("drift-read")
    token = traitdeck.token("bridge", "events:write")
    port = free_port()
    daphne = start_daphne(traitdeck.env, port, tmp_path / "daphne-kdcube.log")
    traitdeck.processes.append(daphne)
    answers: list[dict[str, Any]] = []

    def call() -> None:
        response = httpx.post(
            f"http://127.0.0.1:{port}/api/v1/kdcube/props-changed",
            json={"source": "listener", "updated_by": "ops-admin"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        answers.append(response.json())

    started = time.monotonic()
    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 8
    # One read at once, at most one more at the window's end (3 s); every other call coalesced.
    assert 1 <= len(kdcube.served) <= 2
    assert sum(a["coalesced"] for a in answers) == 8 - len(kdcube.served)
    assert time.monotonic() - started < 30
