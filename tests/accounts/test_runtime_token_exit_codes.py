"""Exit codes as a shell script sees them (DESIGN §6): run the real command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def manage(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    assert run("migrate", "-v0").returncode == 0
    return run


def test_it_exits_0_1_and_2_as_documented(manage) -> None:  # type: ignore[no-untyped-def]
    created = manage("runtime_token", "create", "sim", "--scope", "events:write")
    assert created.returncode == 0
    assert created.stdout.count("\n") == 1
    assert created.stdout.startswith("tdk_")

    duplicate = manage("runtime_token", "create", "sim", "--scope", "events:write")
    assert duplicate.returncode == 1
    assert "already exists" in duplicate.stderr
    assert "Traceback" not in duplicate.stderr

    bad_scope = manage("runtime_token", "create", "x", "--scope", "events:delete")
    assert bad_scope.returncode == 2
    assert "invalid choice" in bad_scope.stderr

    missing_argument = manage("runtime_token", "create")
    assert missing_argument.returncode == 2

    unknown = manage("runtime_token", "revoke", "ghost")
    assert unknown.returncode == 1
    assert "no token named 'ghost'" in unknown.stderr
