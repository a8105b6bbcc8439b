"""A request Django refuses before routing (an invalid Host header) answers 400 — JSON under
``/api/`` (found by schemathesis: a generated Host header got Django's HTML page)."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_an_api_request_with_an_invalid_host_gets_a_json_400() -> None:
    response = Client().post(
        "/api/v1/events", data=b"{}", content_type="application/json", HTTP_HOST="u6y'?e>"
    )
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "Bad request" in response.json()["error"]


def test_a_page_request_with_an_invalid_host_gets_a_plain_400() -> None:
    response = Client().get("/policy/", HTTP_HOST="u6y'?e>")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
