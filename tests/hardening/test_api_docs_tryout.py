"""``/api/docs``: a logged-in admin can try every call from the page (the page hands Swagger UI
its CSRF token, which it sends as ``X-CSRFToken``), and every body has a real example.

The walkthrough found every POST try-out refused 403 "CSRF token missing" and the validate
body's example ``'string'``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from config.api_examples import EXAMPLES
from tests.conftest import make_user
from tests.markup import find
from tests.observe.ingest_support import load_sample_into_draft

pytestmark = pytest.mark.django_db


def _admin() -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("docs-admin", "superuser"))
    return client


def _page_token(client: Client) -> str:
    page = client.get("/api/docs")
    assert page.status_code == 200
    body = find(page.content.decode(), "body")
    token = body.attrs.get("data-csrf-token", "")
    assert token, "the docs page hands Swagger UI no CSRF token"
    assert body.attrs["data-api-csrf"] == "true"
    return token


def _example(method: str, path: str) -> Any:
    return EXAMPLES[(method, path)]


def test_a_post_tried_from_the_docs_page_is_not_refused_for_csrf() -> None:
    client = _admin()
    token = _page_token(client)
    body = _example("post", "/api/v1/policy/validate")
    refused = client.post("/api/v1/policy/validate", body, content_type="application/yaml")
    assert refused.status_code == 403  # without the header: the check still holds
    response = client.post(
        "/api/v1/policy/validate", body, content_type="application/yaml", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200, response.content
    assert response.json()["summary"]["errors"] == 0


def test_every_request_body_has_an_example_for_each_content_type() -> None:
    document = _admin().get("/api/openapi.json").json()
    missing = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for kind, content in operation.get("requestBody", {}).get("content", {}).items():
                example = content.get("example")
                if example in (None, "string", {}):
                    missing.append(f"{method.upper()} {path} ({kind})")
    assert missing == []


@pytest.mark.parametrize(
    ("method", "path", "url", "content_type", "status"),
    [
        ("post", "/api/v1/policy/import", "/api/v1/policy/import", "application/yaml", 200),
        (
            "post",
            "/api/v1/agents/{agent}/dry-run",
            "/api/v1/agents/main/dry-run",
            "application/json",
            200,
        ),
        ("post", "/api/v1/agents", "/api/v1/agents", "application/json", 201),
        # The sample policy has 3 warnings: publishing needs confirm_warnings.
        ("post", "/api/v1/versions", "/api/v1/versions", "application/json", 201),
    ],
)
def test_the_examples_work_when_tried(
    method: str, path: str, url: str, content_type: str, status: int
) -> None:
    load_sample_into_draft()
    client = _admin()
    token = _page_token(client)
    body = _example(method, path)
    response = client.generic(
        method.upper(),
        url,
        body if isinstance(body, str) else json.dumps(body),
        content_type=content_type,
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == status, response.content
