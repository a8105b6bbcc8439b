"""An ``/api/`` path no route matches is a JSON 404 like every other API error (found by
schemathesis: a round path whose last segment is a line break got Django's HTML page)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize(
    "path",
    ["/api/v1/rounds/main/%0A", "/api/v1/rounds/main/t/%0A", "/api/v1/nothing-here", "/api/v2/"],
)
def test_an_unmatched_api_path_is_a_json_404(
    admin_client: Client, settings: Any, debug: bool, path: str
) -> None:
    settings.DEBUG = debug
    response = admin_client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "There is no API route" in response.json()["error"]


def test_a_path_that_only_lacks_its_slash_still_redirects(admin_client: Client) -> None:
    assert admin_client.get("/policy").status_code == 301


def test_pages_keep_their_html_404(admin_client: Client) -> None:
    response = admin_client.get("/policy/nothing-here/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
