"""Run as a script (``python tests/server/live_close_probe.py WORKDIR``): a real worker
(``python -m config.server``) on a fresh SQLite file, a viewer's live websocket that sends one
frame; prints the close code the client got, then the server's log."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(workdir: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": f"sqlite:///{workdir}/db.sqlite3",
    }
    os.environ.update(env)
    import django

    django.setup()
    import httpx
    from django.core.management import call_command
    from django.test import Client
    from websockets.asyncio.client import connect

    from tests.conftest import make_user

    call_command("migrate", verbosity=0)
    client = Client()
    client.force_login(make_user("live-viewer", "viewer", password="pw-live-123"))
    session = client.cookies["sessionid"].value
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (workdir / "server.log").open("w")
    server = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
        [sys.executable, "-m", "config.server", "-b", "127.0.0.1", "-p", str(port)]
        + ["config.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        # A first answer takes seconds on a busy machine (the URLconf is imported then): each
        # try waits for it rather than giving up and asking again behind it.
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=30)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)

        async def talk() -> int | None:
            headers = {"Cookie": f"sessionid={session}", "Origin": f"http://127.0.0.1:{port}"}
            url = f"ws://127.0.0.1:{port}/ws/live/"
            async with connect(url, additional_headers=headers, open_timeout=60) as ws:
                await ws.send("hello")
                try:
                    while True:
                        await asyncio.wait_for(ws.recv(), 60)
                except Exception:  # noqa: BLE001, S110 (the close is what we wait for)
                    pass
                return ws.close_code

        print(f"close code: {asyncio.run(talk())}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)  # a graceful shutdown, seconds on a busy machine
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print((workdir / "server.log").read_text())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
