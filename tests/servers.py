"""Real Traitdeck servers the tests and benches start: one way to start daphne (or
``python -m config.server``), wait until it answers, and stop it.

On a busy machine a fresh server takes seconds to answer its first request (the URLconf is
imported then), so each health check waits up to 30 s rather than giving up at 1 s and asking
again behind it; stopping is SIGTERM, then SIGKILL after 30 s (daphne's graceful shutdown took
over 10 s under load).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
DAPHNE = str(Path(sys.executable).parent / "daphne")
#: Each try of the health check, and the whole start-up.
TRY_S = 30
START_S = 120


def server_env(database: Path, purpose: str, **extra: str) -> dict[str, str]:
    """The environment of a real server with the production settings on a SQLite file: this
    process's environment, a secret key of its own (``purpose``), no Redis (the in-memory channel
    layer: one process), the v3 react agent, plus ``extra``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": f"{purpose}-tests-only-secret-" + "0123456789abcdefghijklmnopqrstuvwxyz",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": f"sqlite:///{database}",
        # The suite's pin (tests/conftest.py, config.settings_test): the v3 pipeline.
        "TRAITDECK_REACT_AGENT_VERSION": "v3",
        **extra,
    }
    env.pop("REDIS_URL", None)
    return env


def daphne_command(port: int, *options: str, server: list[str] | None = None) -> list[str]:
    """``daphne`` (or ``server``, e.g. ``[python, "-m", "config.server"]``) serving Traitdeck's
    ASGI application on 127.0.0.1:``port``."""
    return [
        *(server or [DAPHNE]),
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        *options,
        "config.asgi:application",
    ]


def start_server(
    command: list[str],
    *,
    env: dict[str, str],
    url: str,
    log: Path | IO[Any],
    limit_s: float = START_S,
) -> subprocess.Popen[bytes]:
    """Start ``command`` in the repository with ``env``, its output to ``log`` (a path, or an
    open file the caller closes), and return once ``url``/api/v1/health answers 200. Fails with
    the server's log (when ``log`` is a path) if it exits or does not answer within ``limit_s``."""
    out = log.open("ab") if isinstance(log, Path) else log
    try:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
    finally:
        if isinstance(log, Path):
            out.close()  # the child keeps its own copy
    try:
        wait_answering(url, process, limit_s=limit_s)
    except BaseException as exc:
        process.kill()
        process.wait()
        if isinstance(exc, RuntimeError) and isinstance(log, Path):
            raise RuntimeError(f"{exc}; its log:\n{log.read_text()}") from None
        raise
    return process


def wait_answering(url: str, process: subprocess.Popen[Any], *, limit_s: float = START_S) -> None:
    """Until ``url``/api/v1/health answers 200; fails if ``process`` exits first or time is up."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=TRY_S).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise RuntimeError(
                f"the server at {url} exited with {process.returncode} before answering"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server at {url} did not answer within {limit_s:g} s")
        time.sleep(0.1)


def stop(process: subprocess.Popen[Any] | None, *, grace_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not ended within ``grace_s``."""
    if process is None:
        return
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
