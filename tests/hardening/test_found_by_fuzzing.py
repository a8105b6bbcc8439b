"""What the fuzz tests found, each pinned by a plain example: a refusal (4xx or a form error),
never a 500, and the pages keep working."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from policy.models import AgentManifest
from policy.selectors import draft_state
from tests.hardening.pages import agent_pages, assert_every_page_works, assert_pages_work
from tests.markup import assert_alert
from tests.observe.ingest_support import load_sample_into_draft

pytestmark = pytest.mark.django_db

FORM = "application/x-www-form-urlencoded"


def nested(depth: int) -> Any:
    return json.loads("[" * depth + "]" * depth)


@pytest.fixture
def admin(admin_client: Client) -> Client:
    load_sample_into_draft()
    return admin_client


def upload_by_form(client: Client, text: str) -> Any:
    return client.post(
        "/policy/agents/main/manifest/",
        {"page": "manifest", "text": text, "base_revision": draft_state().revision},
    )


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_manifest_form_with_nan_or_infinity_is_a_form_error_not_a_500(
    admin: Client, number: str
) -> None:
    # Python's JSON parser takes these words; the database's JSON check does not (it was a 500).
    response = upload_by_form(admin, f'{{"jobs.search": {{"tool_traits": {{"x": {number}}}}}}}')
    assert response.status_code == 422
    assert_alert(response.content.decode(), "which JSON cannot hold")
    assert not AgentManifest.objects.exists()
    assert_every_page_works(admin)


@pytest.mark.parametrize("depth", [100, 900, 5000])
def test_a_deeply_nested_manifest_form_is_a_form_error_not_a_500(admin: Client, depth: int) -> None:
    text = json.dumps({"jobs.search": {"tool_traits": {"x": "["}}}).replace(
        '"["', "[" * depth + "]" * depth
    )
    response = upload_by_form(admin, text)
    assert response.status_code == 422
    assert_alert(response.content.decode(), "nests")
    assert not AgentManifest.objects.exists()
    assert_pages_work(admin, ["/policy/", *agent_pages("main")])


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("put", "/api/v1/agents/main/manifest", {"a.b": {"tool_traits": {"x": nested(900)}}}),
        ("patch", "/api/v1/agents/main/connections/0", {"x": nested(500)}),
        ("post", "/api/v1/agents/main/connections", {"kind": "mcp", "alias": "q", "x": nested(70)}),
    ],
    ids=["manifest", "connection-patch", "connection-post"],
)
def test_a_json_body_nested_past_64_levels_is_422_not_a_500(
    admin: Client, method: str, url: str, body: Any
) -> None:
    # Saving it exhausted the stack (RecursionError) in the checks and the YAML dump.
    before = draft_state().revision
    response = getattr(admin, method)(url, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 422, response.content[:200]
    assert "nests deeper than 64 levels" in response.json()["error"]
    assert draft_state().revision == before
    assert not AgentManifest.objects.exists()
    assert_every_page_works(admin)


def test_a_json_body_nested_64_levels_deep_is_still_read(admin: Client) -> None:
    body = {"a.b": {"tool_traits": {"x": nested(61)}}}  # 64 levels with the three above
    response = admin.put(
        "/api/v1/agents/main/manifest", data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 200, response.content[:200]
    assert_pages_work(admin, [*agent_pages("main"), "/policy/agents/main/manifest/?download=1"])


# PostgreSQL cannot store a NUL character in text or JSON: the import and the edits were 500s
# there (SQLite stores it). Refused on both stores alike.

NUL_YAML = (
    "surfaces: {as_consumer: {agents: {main: {tools: ["
    '{kind: python, module: m, alias: "jobs\\0x", allowed: [a]}]}}}}\n'
)


def test_yaml_with_a_nul_escape_is_refused_with_text_encoding(admin: Client) -> None:
    before = draft_state().revision
    validate = admin.post("/api/v1/policy/validate", data=NUL_YAML, content_type="application/yaml")
    (diagnostic,) = [d for d in validate.json()["diagnostics"] if d["code"] == "text-encoding"]
    assert "NUL character" in diagnostic["message"]
    assert diagnostic["line"] == 1
    imported = admin.post(
        "/api/v1/policy/import?dry_run=false", data=NUL_YAML, content_type="application/yaml"
    )
    assert imported.status_code == 422
    assert draft_state().revision == before
    assert_every_page_works(admin)


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("patch", "/api/v1/agents/main/connections/0", {"alias": "jobs\x00"}),
        ("post", "/api/v1/agents/main/connections", {"kind": "mcp", "server_id": "s\x00"}),
    ],
    ids=["alias", "server_id"],
)
def test_an_edit_holding_a_nul_character_is_422(
    admin: Client, method: str, url: str, body: Any
) -> None:
    before = draft_state().revision
    response = getattr(admin, method)(url, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 422, response.content[:200]
    assert "NUL" in response.json()["error"]
    assert draft_state().revision == before
    assert_pages_work(admin, ["/policy/", "/api/v1/agents", *agent_pages("main")])
