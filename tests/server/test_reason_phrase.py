"""The status line's reason phrase on the production server (``python -m config.server``, the
real application): daphne hands Twisted only the status code, and Twisted's table has no 422, so
every refusal of a body went out as "422 Unknown Status" (Swagger UI on /api/docs showed
"Error: Unknown Status")."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from config.server import reason_phrase
from tests.kdcube.bridge.conftest import free_port
from tests.servers import ROOT, daphne_command, server_env, start_server, stop

PASSWORD = "pw-reason-phrase-1"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = server_env(tmp_path / "db.sqlite3", "reason-phrase", TRAITDECK_SERVE_STATIC="1")
    for args in (
        ["migrate", "--no-input", "-v0"],
        [
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_superuser('ed', password={PASSWORD!r})",
        ],
    ):
        subprocess.run(  # noqa: S603 (our own interpreter and manage.py)
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True
        )
    server = start_server(
        daphne_command(port, server=[sys.executable, "-m", "config.server"]),
        env=env,
        url=f"http://127.0.0.1:{port}",
        log=tmp_path / "server.log",
    )
    yield f"http://127.0.0.1:{port}"
    stop(server)


def test_a_refused_body_goes_out_as_422_unprocessable_entity(served: str) -> None:
    with httpx.Client(base_url=served, timeout=30) as client:
        client.get("/accounts/login/")
        client.post(
            "/accounts/login/",
            data={
                "username": "ed",
                "password": PASSWORD,
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
            },
        )
        response = client.post(
            "/api/v1/versions", json={}, headers={"X-CSRFToken": client.cookies["csrftoken"]}
        )
    assert response.status_code == 422, response.text
    assert response.reason_phrase == "Unprocessable Entity"
    assert "message" in response.json()["error"]  # the refusal still says what is missing


def test_codes_twisted_does_not_name_get_pythons_phrase_and_unknown_ones_none() -> None:
    assert reason_phrase(429) == b"Too Many Requests"
    assert reason_phrase(599) is None
