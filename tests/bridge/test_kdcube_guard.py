"""The push guard with the bridge listening (issue 33): another admin's change, seen by the
listener, is not cleared by that read. A real daphne and the ``kdcube_bridge`` command on a real
``redis-server``; KDCube answered from its own recorded admin routes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.bridge.conftest import (
    PYTHON,
    ROOT,
    RedisServer,
    Traitdeck,
    free_port,
    start_daphne,
    stop,
    wait_until,
)
from tests.bridge.test_props_watch import KDCUBE_ENV, MESSAGE, reads, watching
from tests.policy import kdcube_replay
from tests.policy.kdcube_replay import ReplayServer, exchange

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
