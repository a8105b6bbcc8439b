"""A manifest write is a draft change: it bumps the revision, and a stale one gets 409 and
stores nothing (API with ``If-Match``, the browser form with ``base_revision``)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from policy.models import AgentManifest
from policy.selectors import draft_state
from policy.services import draft_change
from tests.markup import find

pytestmark = pytest.mark.django_db

MANIFEST = "/api/v1/agents/main/manifest"
FIRST = {"jobs.search": {"tool_traits": {"strategy": ["exploration"]}}}
SECOND = {"jobs.search": {"tool_traits": {"strategy": ["neutral"]}}}


@pytest.fixture
def base() -> int:
    doc = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}}
    return draft_change(edit=lambda _old: doc, base_revision=None).revision


def put(client: Client, data: object, revision: int) -> object:
    return client.put(
        MANIFEST,
        data=json.dumps(data),
        content_type="application/json",
        headers={"If-Match": f'"{revision}"'},
    )


def test_two_uploads_with_the_same_if_match_the_second_is_409(
    editor_client: Client, base: int
) -> None:
    first = put(editor_client, FIRST, base)
    assert first.status_code == 200  # type: ignore[attr-defined]
    assert first.json()["revision"] == base + 1  # type: ignore[attr-defined]
    second = put(editor_client, SECOND, base)
    assert second.status_code == 409  # type: ignore[attr-defined]
    assert second.json()["revision"] == base + 1  # type: ignore[attr-defined]
    assert AgentManifest.objects.get(agent="main").data == FIRST
    assert draft_state().revision == base + 1


def test_a_stale_manifest_removal_is_409_and_keeps_the_manifest(
    editor_client: Client, base: int
) -> None:
    put(editor_client, FIRST, base)
    response = editor_client.delete(MANIFEST, headers={"If-Match": f'"{base}"'})
    assert response.status_code == 409
    assert AgentManifest.objects.get(agent="main").data == FIRST


def test_the_manifest_form_carries_the_revision(editor_client: Client, base: int) -> None:
    html = editor_client.get("/policy/agents/main/").content.decode()
    form = find(html, "section", id="manifest").find("form")
    assert form.find("input", name="base_revision").value == str(base)


def test_a_stale_manifest_form_shows_both_manifests_and_stores_nothing(
    editor_client: Client, base: int
) -> None:
    put(editor_client, FIRST, base)
    response = editor_client.post(
        "/policy/agents/main/manifest/",
        {"text": json.dumps(SECOND), "base_revision": base},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 409
    html = response.content.decode()
    manifest = find(html, "section", id="manifest")
    conflict = manifest.find("div", class_="editor-conflict")
    assert conflict.text.startswith("Conflict:")
    assert f"Now in the draft (revision {base + 1}): the manifest of main" in conflict.text
    # the manifest in force (YAML)
    assert "- exploration" in conflict.find("pre", class_="conflict-current").raw_text
    # the user's unsaved manifest, also back in the form
    assert json.loads(manifest.find("textarea", name="text").value) == SECOND
    assert manifest.find("input", name="base_revision").value == str(base + 1)
    assert AgentManifest.objects.get(agent="main").data == FIRST
    again = editor_client.post(
        "/policy/agents/main/manifest/",
        {"text": json.dumps(SECOND), "base_revision": base + 1},
        headers={"HX-Request": "true"},
    )
    assert again.status_code == 200
    assert AgentManifest.objects.get(agent="main").data == SECOND


def test_a_stale_agent_form_shows_the_agent_now_beside_the_input(
    editor_client: Client, base: int
) -> None:
    draft_change(edit=lambda doc: doc, base_revision=None)  # someone else saved meanwhile
    response = editor_client.post(
        "/policy/agents/main/rename/",
        {"name": "lead", "base_revision": base},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 409
    html = response.content.decode()
    now = find(html, "div", class_="conflict-view").find_all("div", class_="conflict-side")[0]
    assert now.find("h3").text.startswith("Now in the draft (revision")
    assert now.find("h3").text.endswith(": agent main")
    assert "name: lead" in find(html, "pre", class_="conflict-yours").raw_text
    assert draft_state().agents == ["main"]
