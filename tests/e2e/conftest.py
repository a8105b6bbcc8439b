"""Browser tests: real chromium (Debian's) against a real daphne process serving the ASGI app.

This group runs in its own pytest process without pytest-django: the server is a separate
process, so the database is a real SQLite file both share, migrated once per session.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.servers import daphne_command, server_env, start_server, stop

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Every ``expect`` waits for its condition up to this long (Playwright's default is 5 s): on a
#: machine whose cores are busy, daphne and chromium answer slower, and a wait that ends as soon
#: as the page is right costs nothing when it is fast.
expect.set_options(timeout=30_000)
#: The longest a ``manage.py simulate`` run may take (``communicate(timeout=…)``): a Django
#: start-up, then rounds over 1–3 s each. A ceiling, not a wait: the run ends when it is done.
SIMULATOR_S = 180
#: A wait for rounds to reach the page that includes a simulator's start-up (a whole Django
#: import on a busy machine) gets more than the 30 s default.
ROUNDS_ARRIVE_MS = 60_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class LiveServer:
    url: str
    env: dict[str, str]

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a management command against the live server's database."""
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
        )


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    workdir = tmp_path_factory.mktemp("live")
    port = _free_port()
    env = server_env(
        workdir / "db.sqlite3",
        "browser",
        TRAITDECK_SERVE_STATIC="1",
        # Every test logs in from 127.0.0.1: no failed-login limit (as in config.settings_test).
        TRAITDECK_LOGIN_MAX_ATTEMPTS="0",
        # Tool discovery may start the mixed test MCP server (tests/e2e/test_discovery.py).
        TRAITDECK_MCP_STDIO_COMMANDS=json.dumps(
            [[sys.executable, str(ROOT / "tests" / "discovery" / "mcp_servers.py"), "mixed"]]
        ),
    )
    server = LiveServer(url=f"http://127.0.0.1:{port}", env=env)
    server.manage("migrate", "--no-input", "-v0")
    log = workdir / "daphne.log"
    process = start_server(daphne_command(port), env=env, url=server.url, log=log)
    yield server
    stop(process)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not Path(CHROMIUM).exists():
        message = f"chromium not found at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # in CI a missing browser is a failure, never a skip
        pytest.skip(message)
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture
def admin_user(live_server: LiveServer) -> tuple[str, str]:
    """A superuser in the live server's database (made with a real management command)."""
    username, password = f"admin{time.monotonic_ns()}", "browser-pw-123"
    code = (
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_superuser({username!r}, password={password!r})"
    )
    live_server.manage("shell", "-c", code)
    return username, password


# --- the policy editor (issue 4) -------------------------------------------------------------

SAMPLE_POLICY = ROOT / "policy" / "sample" / "sample-policy.yaml"


def log_in(page: Page, live_server: LiveServer, user: tuple[str, str]) -> None:
    """Log in through the login form, as a visitor does."""
    username, password = user
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")


@pytest.fixture
def signed_in_page(page: Page, live_server: LiveServer, admin_user: tuple[str, str]) -> Page:
    """Playwright's ``page``, logged in as a fresh superuser through the login form."""
    log_in(page, live_server, admin_user)
    return page


@pytest.fixture
def sample_draft(live_server: LiveServer, signed_in_page: Page) -> str:
    """The draft holds exactly the sample policy (its agent ``main``), whatever ran before.

    The server is shared by the whole session: on a fresh database ``load_sample_policy`` loads
    the sample; when the draft already has content, the sample is imported through the API
    (``dry_run=false``) with the logged-in session, so a test never depends on the order.
    Returns the command's output.
    """
    output = live_server.manage("load_sample_policy").stdout
    if "sample not loaded" not in output:
        return output
    page = signed_in_page
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{live_server.url}/api/v1/policy/import?dry_run=false",
        data=SAMPLE_POLICY.read_bytes(),
        headers={"Content-Type": "application/yaml", "X-CSRFToken": token},
    )
    assert response.status == 200, response.text()
    assert response.json()["applied"] is True, response.text()
    return output


# --- live rounds (issue 5) --------------------------------------------------------------------


@pytest.fixture
def simulator_token(live_server: LiveServer) -> str:
    """A fresh runtime token with scope events:write, made with the real command."""
    done = live_server.manage(
        "runtime_token",
        "create",
        "e2e-simulator",
        "--scope",
        "events:write",
        "--rotate",
        check=False,
    )
    assert done.returncode == 0, f"runtime_token create failed: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def start_simulator(
    live_server: LiveServer, simulator_token: str
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``manage.py simulate`` against the live server as a runtime would run it.

    Returns a function taking extra arguments (``--rounds``, ``--seed``…); the processes it
    started are stopped at the end of the test if still running.
    """
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "simulate", "--url", live_server.url, *args],
            cwd=ROOT,
            env={**live_server.env, "TRAITDECK_TOKEN": simulator_token},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.terminate()
            process.communicate(timeout=10)
