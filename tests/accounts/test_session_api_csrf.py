"""Session-only API routes: who is asking is checked before CSRF.

Anonymous → 401 JSON (never Django's CSRF 403 page); logged in but no CSRF token → 403 JSON
saying why; logged in with the token → the write happens.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.conftest import make_user

pytestmark = pytest.mark.django_db

BODY = json.dumps({"name": "helper"})


def post(client: Client, **headers: str) -> Any:
    return client.post("/api/v1/agents", data=BODY, content_type="application/json", **headers)


@pytest.mark.parametrize(
    "headers",
    [{}, {"HTTP_AUTHORIZATION": "Bearer not-a-token"}, {"HTTP_AUTHORIZATION": "Basic eDp5"}],
    ids=["no-credentials", "unknown-bearer", "basic"],
)
def test_an_anonymous_write_is_401_json_not_a_csrf_403(headers: dict[str, str]) -> None:
    response = post(Client(enforce_csrf_checks=True), **headers)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"].startswith("Authentication required")


def test_a_logged_in_write_without_the_csrf_token_is_403_json_with_the_reason() -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("eda", "editor"))
    response = post(client)
    assert response.status_code == 403
    error = response.json()["error"]
    assert error.startswith("CSRF check failed (CSRF cookie not set)")
    assert "X-CSRFToken" in error


def test_a_logged_in_write_with_a_wrong_csrf_token_is_refused() -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("eda", "editor"))
    client.get("/accounts/login/")  # sets the csrftoken cookie
    response = post(client, HTTP_X_CSRFTOKEN="x" * 32)
    assert response.status_code == 403
    assert "CSRF token" in response.json()["error"]


def test_a_logged_in_write_with_the_csrf_token_is_done() -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("eda", "editor"))
    client.get("/accounts/login/")
    token = client.cookies["csrftoken"].value
    response = post(client, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201, response.content
