"""Browser tests: real chromium (Debian's) against a real daphne process serving the ASGI app.

This group runs in its own pytest process without pytest-django: the server is a separate
process, so the database is a real SQLite file both share, migrated once per session.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


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
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "browser-tests-only-secret",
        "DEBUG": "0",
        "TRAITDECK_SERVE_STATIC": "1",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
    }
    server = LiveServer(url=f"http://127.0.0.1:{port}", env=env)
    server.manage("migrate", "--no-input", "-v0")
    log = (workdir / "daphne.log").open("w")
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/api/v1/health", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"daphne did not start: {(workdir / 'daphne.log').read_text()}")
        time.sleep(0.1)
    yield server
    process.terminate()
    process.wait(timeout=10)
    log.close()


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
