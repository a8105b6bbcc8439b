from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import RuntimeToken
from accounts.tokens import runtime_token_create, runtime_token_revoke

pytestmark = pytest.mark.django_db


def scoped_api() -> Any:
    """The real stack (access middleware and API) on a route that needs the events:read scope."""

    class Scoped:
        def post(self, path: str, headers: dict[str, str] | None = None) -> Any:
            return Client().get("/api/v1/rounds", headers=headers or {})

    return Scoped()


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_it_accepts_a_token_with_the_scope() -> None:
    issued = runtime_token_create(name="sim", scopes=["events:read"])
    response = scoped_api().post("/ingest", headers=bearer(issued.secret))
    assert response.status_code == 200
    assert response.json()["rounds"] == []


def test_it_answers_401_json_without_a_token() -> None:
    response = scoped_api().post("/ingest")
    assert response.status_code == 401
    assert "Authentication required" in response.json()["error"]


@pytest.mark.parametrize(
    "secret",
    ["nonsense", "tdk_000000000000_wrong", "", "Bearer", "tdk_only"],
)
def test_it_answers_401_for_an_invalid_token(secret: str) -> None:
    runtime_token_create(name="sim", scopes=["events:write"])
    response = scoped_api().post("/ingest", headers=bearer(secret))
    assert response.status_code == 401
    assert set(response.json()) == {"error"}


def test_it_answers_401_for_a_right_key_id_with_a_wrong_secret() -> None:
    issued = runtime_token_create(name="sim", scopes=["events:write"])
    forged = issued.secret[:-4] + "AAAA"
    response = scoped_api().post("/ingest", headers=bearer(forged))
    assert response.status_code == 401


def test_it_answers_401_for_a_revoked_token() -> None:
    issued = runtime_token_create(name="sim", scopes=["events:write"])
    runtime_token_revoke(name="sim")
    response = scoped_api().post("/ingest", headers=bearer(issued.secret))
    assert response.status_code == 401


def test_it_answers_403_json_for_a_token_without_the_scope() -> None:
    issued = runtime_token_create(name="writer", scopes=["events:write"])
    response = scoped_api().post("/ingest", headers=bearer(issued.secret))
    assert response.status_code == 403
    assert response.json() == {"error": "Not allowed: this token lacks the 'events:read' scope."}


def test_it_records_the_last_use() -> None:
    issued = runtime_token_create(name="sim", scopes=["events:read"])
    scoped_api().post("/ingest", headers=bearer(issued.secret))
    assert RuntimeToken.objects.get(name="sim").last_used_at is not None


def test_whoami_names_the_token_and_its_scopes(client: Client) -> None:
    issued = runtime_token_create(name="sim", scopes=["events:write", "config:read"])
    response = client.get("/api/v1/whoami", headers=bearer(issued.secret))
    assert response.status_code == 200
    assert response.json() == {
        "kind": "token",
        "name": "sim",
        "scopes": ["events:write", "config:read"],
    }


def test_whoami_answers_401_json_not_a_login_redirect(client: Client) -> None:
    response = client.get("/api/v1/whoami")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")


def test_whoami_knows_a_logged_in_user(client: Client) -> None:
    get_user_model().objects.create_user("ana", password="pw-ana-123")
    client.login(username="ana", password="pw-ana-123")
    response = client.get("/api/v1/whoami")
    assert response.json() == {"kind": "user", "name": "ana", "scopes": []}
