"""The API docs (/api/docs) and schema (/api/openapi.json): behind login unless DEBUG is on."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

DOCS, SCHEMA = "/api/docs", "/api/openapi.json"


@override_settings(DEBUG=False)
def test_anonymous_visitors_are_sent_to_the_login_page_for_the_docs() -> None:
    response = Client().get(DOCS)
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/api/docs"


@override_settings(DEBUG=False)
def test_anonymous_clients_get_401_json_for_the_schema() -> None:
    response = Client().get(SCHEMA)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"].startswith("Authentication required")


@override_settings(DEBUG=False)
def test_viewers_read_the_docs_and_the_schema(viewer_client: Client) -> None:
    assert viewer_client.get(DOCS).status_code == 200
    schema = viewer_client.get(SCHEMA)
    assert schema.status_code == 200
    assert schema.json()["info"]["title"] == "Traitdeck API"


@override_settings(DEBUG=False)
def test_a_user_without_a_role_is_refused_the_schema(no_role_client: Client) -> None:
    assert no_role_client.get(SCHEMA).status_code == 403


@override_settings(DEBUG=True)
@pytest.mark.parametrize("url", [DOCS, SCHEMA])
def test_with_debug_on_the_docs_are_open(url: str) -> None:
    assert Client().get(url).status_code == 200
