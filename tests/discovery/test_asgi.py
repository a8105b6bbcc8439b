"""A discovery in flight does not hold up other requests: a real daphne serving Traitdeck, a real
SDK server that takes seconds to list, and other requests sent meanwhile.

The discovery views are sync and wait on the listing in their thread. That stalls nobody
because Django's ASGI handler runs each request's sync code in a thread of its own
(``asgiref.sync.ThreadSensitiveContext`` per request), not on one thread shared by every sync
view: run with that context taken out of ``django/core/handlers/asgi.py``, this test fails (the
other requests wait for the listings). See docs/discovery.md, "Entry points".
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.discovery.conftest import stdio_argv
from tests.kdcube.bridge.conftest import free_port
from tests.markup import text_of
from tests.servers import daphne_command, server_env, start_server, stop

ROOT = Path(__file__).resolve().parents[2]
# Long enough that the other requests are answered well before it on a busy machine.
SLOW_S = 8
ARGV = stdio_argv(f"slow:{SLOW_S}")
POLICY = {
    "surfaces": {
        "as_consumer": {
            "mcp": {"services": {"slow": {"command": ARGV[0], "args": list(ARGV[1:])}}},
            "agents": {"main": {"tools": [{"kind": "mcp", "server_id": "slow", "alias": "sl"}]}},
        }
    }
}


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = server_env(
        tmp_path / "db.sqlite3",
        "discovery",
        TRAITDECK_SERVE_STATIC="1",
        TRAITDECK_MCP_STDIO_COMMANDS=json.dumps([list(ARGV)]),
    )
    _manage(env, "migrate", "--no-input", "-v0")
    _manage(
        env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        "from policy.services import draft_change; "
        "get_user_model().objects.create_superuser('ed', password='pw-discovery-1'); "
        f"draft_change(edit=lambda _old: {POLICY!r}, base_revision=None)",
    )
    daphne = start_server(
        daphne_command(port), env=env, url=f"http://127.0.0.1:{port}", log=tmp_path / "daphne.log"
    )
    yield f"http://127.0.0.1:{port}"
    stop(daphne)


def _logged_in(url: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30)
    page = client.get("/accounts/login/")
    assert "csrftoken" in client.cookies, (page.status_code, page.headers, page.text[:300])
    response = client.post(
        "/accounts/login/",
        data={
            "username": "ed",
            "password": "pw-discovery-1",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
    )
    assert response.status_code in (200, 302), response.text
    assert "sessionid" in client.cookies
    return client


@pytest.mark.parametrize(
    "discover",
    ["/api/v1/agents/main/mcp/slow/discover", "/policy/agents/main/connections/0/discover/"],
    ids=["api", "page"],
)
def test_other_requests_answer_while_discoveries_are_in_flight(served: str, discover: str) -> None:
    client = _logged_in(served)
    csrf = client.cookies["csrftoken"]
    answers: list[httpx.Response] = []

    def run() -> None:
        with httpx.Client(base_url=served, cookies=client.cookies, timeout=60) as own:
            answers.append(own.post(discover, headers={"X-CSRFToken": csrf}))

    runs = [threading.Thread(target=run) for _ in range(3)]
    for thread in runs:
        thread.start()
    # Two of the three are refused at once (one discovery per server): the third is in flight,
    # waiting SLOW_S seconds on the slow server.
    deadline = time.monotonic() + 60
    while len(answers) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(answers) == 2, "two discoveries should be refused while the first one lists"
    for path in ("/api/v1/agents", "/policy/"):
        assert client.get(path).status_code == 200
    # Those pages answered while the first discovery still waited: had they queued behind it,
    # its answer would have come first.
    assert len(answers) == 2, "the pages waited for the discovery in flight"
    for thread in runs:
        thread.join()
    # One discovery per server at a time (issue 34, item 7): the first lists, the others are
    # refused at once with a sentence, not queued behind it.
    assert sorted(a.status_code for a in answers) == [200, 422, 422], [a.text for a in answers]
    refusals = [a for a in answers if a.status_code == 422]
    said = [
        a.json()["error"] if "api" in discover else text_of(a.text, "p", id="discovery-notice")
        for a in refusals
    ]
    assert all("already running" in sentence for sentence in said), said
