"""KDCube bundles descriptors imported through the API, the import page and ``manage.py policy``."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from policy.selectors import draft_state
from tests.markup import assert_alert, document, find, find_all, page_text, table_rows, text_of

IMPORT = "/api/v1/policy/import"
VALIDATE = "/api/v1/policy/validate"
YAML = "application/yaml"

DESCRIPTOR = """\
bundles:
  version: "1"
  items:
    - id: "site@1"
      config:
        ui: {}
    - id: "agent@1"
      config:
        # what the agent may call
        surfaces:
          as_consumer:
            agents:
              main:
                tools:
                  - {kind: python, alias: t, ref: t.py, allowed: [a],
                     tool_traits: {a: {strategy: [bogus]}}}
"""
TWO_POLICIES = (
    DESCRIPTOR
    + """\
    - id: "other@1"
      config:
        tools: {agents: {default_agent: []}}
"""
)


def post_yaml(client: Client, url: str, text: str) -> Any:
    return client.post(url, data=text, content_type=YAML)


@pytest.fixture
def api(admin_client: Client) -> Client:
    return admin_client


def test_it_imports_the_only_bundle_with_a_policy_and_points_into_the_descriptor(
    api: Client,
) -> None:
    response = post_yaml(api, f"{IMPORT}?dry_run=false", DESCRIPTOR)
    assert response.status_code == 200
    body = response.json()
    assert (body["bundle"], body["policy_bundles"]) == ("agent@1", ["agent@1"])
    [bogus] = [d for d in body["diagnostics"] if d["code"] == "strategy-value"]
    assert DESCRIPTOR.splitlines()[bogus["line"] - 1].strip().startswith("tool_traits")
    assert list(draft_state().data["surfaces"]["as_consumer"]["agents"]) == ["main"]


def test_it_answers_422_with_the_bundles_when_several_carry_a_policy(api: Client) -> None:
    response = post_yaml(api, f"{IMPORT}?dry_run=false", TWO_POLICIES)
    assert response.status_code == 422
    assert response.json()["policy_bundles"] == ["agent@1", "other@1"]
    assert draft_state().revision == 0


def test_it_imports_the_bundle_named_by_the_query(api: Client) -> None:
    response = post_yaml(api, f"{IMPORT}?bundle=other@1", TWO_POLICIES)
    assert response.status_code == 200
    assert response.json()["bundle"] == "other@1"


def test_an_unknown_bundle_is_404_with_the_ids_that_carry_a_policy(api: Client) -> None:
    for url in (f"{IMPORT}?bundle=site@1", f"{VALIDATE}?bundle=nope"):
        response = post_yaml(api, url, TWO_POLICIES)
        assert response.status_code == 404
        assert response.json()["policy_bundles"] == ["agent@1", "other@1"]


def test_a_descriptor_without_a_policy_is_422(api: Client) -> None:
    text = 'bundles: {version: "1", items: [{id: a, config: {ui: {}}}]}'
    response = post_yaml(api, IMPORT, text)
    assert response.status_code == 422
    assert "No bundle of the descriptor carries a policy" in response.json()["error"]


def test_the_import_page_offers_a_bundle_picker_and_imports_the_picked_bundle(
    admin_client: Client,
) -> None:
    response = admin_client.post("/policy/import/", {"op": "preview", "text": TWO_POLICIES})
    assert response.status_code == 422
    page = response.content.decode()
    picker = find(page, "select", name="bundle")
    assert "other@1" in [option.text for option in picker.find_all("option", value="other@1")]
    response = admin_client.post(
        "/policy/import/", {"op": "preview", "text": TWO_POLICIES, "bundle": "agent@1"}
    )
    assert response.status_code == 200
    picked = find(response.content.decode(), "form", class_="bundle-picker")
    assert "Importing the props of bundle agent@1" in picked.text
    assert text_of(response.content.decode(), "strong", class_="bundle-chosen") == "agent@1"
    response = admin_client.post(
        "/policy/import/",
        {"op": "apply", "text": TWO_POLICIES, "bundle": "agent@1", "base_revision": "0"},
    )
    assert response.status_code == 302
    assert list(draft_state().data["surfaces"]["as_consumer"]["agents"]) == ["main"]


@pytest.mark.django_db
def test_the_policy_command_imports_a_descriptor_bundle(tmp_path: Any) -> None:
    path = tmp_path / "bundles.yaml"
    path.write_text(TWO_POLICIES)
    with pytest.raises(CommandError) as caught:
        call_command("policy", "import", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert caught.value.returncode == 2
    with pytest.raises(CommandError) as caught:
        call_command("policy", "import", str(path), "--bundle", "x", stderr=io.StringIO())
    assert caught.value.returncode == 1
    out = io.StringIO()
    call_command("policy", "import", str(path), "--bundle", "agent@1", stdout=out, stderr=out)
    assert "imported into the draft" in out.getvalue()
    assert draft_state().revision == 1


def _changed(before: str, after: str) -> list[str]:
    import difflib

    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_the_api_writes_the_draft_back_into_the_descriptor(api: Client) -> None:
    assert post_yaml(api, f"{IMPORT}?dry_run=false", DESCRIPTOR).status_code == 200
    unchanged = post_yaml(api, "/api/v1/policy/export-into", DESCRIPTOR)
    assert unchanged.status_code == 200
    assert unchanged.content.decode() == DESCRIPTOR
    assert unchanged["X-Bundle"] == "agent@1"
    edited = DESCRIPTOR.replace("strategy: [bogus]", "strategy: [exploration]")
    assert post_yaml(api, f"{IMPORT}?dry_run=false", edited).status_code == 200
    written = post_yaml(api, "/api/v1/policy/export-into", DESCRIPTOR).content.decode()
    assert written == edited
    assert len(_changed(DESCRIPTOR, written)) == 2


def test_the_api_refuses_a_draft_that_changed_keys_outside_the_policy(api: Client) -> None:
    props = "react: {main: {x: 1}}\nsurfaces: {as_consumer: {agents: {main: {tools: []}}}}\n"
    assert post_yaml(api, f"{IMPORT}?dry_run=false", props).status_code == 200
    response = post_yaml(api, "/api/v1/policy/export-into", DESCRIPTOR)
    assert response.status_code == 422
    assert "react" in response.json()["error"]
    assert response.json()["diagnostics"][0]["code"] == "outside-owned"


def test_the_api_answers_404_for_an_unknown_bundle_or_version(api: Client) -> None:
    assert post_yaml(api, "/api/v1/policy/export-into?bundle=x", DESCRIPTOR).status_code == 404
    assert post_yaml(api, "/api/v1/policy/export-into?version=9", DESCRIPTOR).status_code == 404


def test_the_page_downloads_the_descriptor_with_the_draft_written_in(
    admin_client: Client,
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    edited = DESCRIPTOR.replace("strategy: [bogus]", "strategy: [neutral]")
    admin_client.post("/policy/import/", {"op": "apply", "text": edited, "base_revision": "0"})
    assert admin_client.get("/policy/export/descriptor/").status_code == 200
    upload = SimpleUploadedFile("bundles.yaml", DESCRIPTOR.encode(), "application/yaml")
    response = admin_client.post("/policy/export/descriptor/", {"file": upload, "bundle": ""})
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="bundles.yaml"'
    assert response.content.decode() == edited
    upload = SimpleUploadedFile("bundles.yaml", DESCRIPTOR.encode(), "application/yaml")
    response = admin_client.post("/policy/export/descriptor/", {"file": upload, "bundle": "x"})
    assert response.status_code == 404
    assert_alert(response.content.decode(), "has no bundle 'x'")


UNSEEN = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - {kind: mcp, server_id: k, alias: knowledge, allowed: ['*'],
             tool_traits: {'*': {strategy: [exploration]}}}
"""


def test_a_connection_whose_tools_are_unseen_shows_as_every_tool_the_server_lists(
    api: Client,
) -> None:
    body = post_yaml(api, f"{IMPORT}?dry_run=false", UNSEEN).json()
    assert body["summary"]["errors"] == 0  # publishing is not blocked
    assert [d["code"] for d in body["diagnostics"]].count("tools-unknown") == 1
    effective = api.get("/api/v1/agents/main/effective").json()
    assert effective["unseen_tools"] == [
        {
            "pattern": "mcp.knowledge.*",
            "tools": "every tool the server lists",
            "traits": {"strategy": ["exploration"]},
            "early": False,
        }
    ]
    text = api.get("/api/v1/agents/main/catalog").content.decode()
    # raw: the catalog is plain text, as the runtime's prompt holds it.
    assert "[*] mcp.knowledge.*  (every tool the server lists" in text
    page = api.get("/policy/agents/main/effective/").content.decode()
    [unseen] = table_rows(find(page, "table", id="unseen-tools"))
    assert unseen["Tools"].startswith("mcp.knowledge.* every tool the server lists;")
    assert unseen["Traits each of them gets"].startswith("strategy: ")
    assert "exploration" in unseen["Traits each of them gets"]


LEGACY = (
    "tools:\n  agents:\n    default_agent:\n      - {kind: python, alias: t, ref: t.py,"
    " allowed: [a], tool_traits: {a: {strategy: [exploration]}}}\n"
)


def test_the_legacy_tools_agents_shape_imports_and_predicts_as_the_runtime(api: Client) -> None:
    response = post_yaml(api, f"{IMPORT}?dry_run=false", LEGACY)
    assert response.status_code == 200
    assert response.json()["summary"]["errors"] == 0
    effective = api.get("/api/v1/agents/helper/effective").json()
    assert effective["resolved_agent"] == "default_agent"
    assert effective["tools"]["t.a"]["traits"] == {"strategy": ["exploration"]}
    for url in ("/policy/", "/api/v1/agents", "/policy/export.yaml", "/policy/versions/"):
        assert api.get(url).status_code == 200, url


def test_a_legacy_draft_can_be_published(api: Client) -> None:
    assert post_yaml(api, f"{IMPORT}?dry_run=false", LEGACY).status_code == 200
    out = io.StringIO()
    call_command("policy", "publish", "--message", "legacy", "--yes", stdout=out, stderr=out)
    assert "published version 1" in out.getvalue()
    assert api.get("/api/v1/versions/1/export.yaml").status_code == 200


@pytest.mark.django_db
def test_the_import_page_asks_to_pick_a_bundle_in_its_own_words(admin_client: Client) -> None:
    """The walkthrough: "name one with --bundle (…)" in red on the first preview, and the
    "Choose a bundle" heading below the picker."""
    page = admin_client.post("/policy/import/", {"op": "preview", "text": TWO_POLICIES})
    text = page.content.decode()
    assert "--bundle" not in page_text(text)
    picker = find(text, "form", class_="bundle-picker")
    assert picker.find("h2").text == "Pick a bundle"
    # The heading comes before the picker it names, and the first preview is a question.
    in_order = document(text).iter()
    heading = [element for element in in_order if element.text == "Pick a bundle"]
    select = [element for element in in_order if element.attrs.get("id") == "import-bundle"]
    assert in_order.index(heading[0]) < in_order.index(select[0])
    prompt = find(text, "p", class_="bundle-prompt")
    assert "pick a bundle" in prompt.text
    assert not picker.find_all("p", class_="error")


@pytest.mark.django_db
def test_the_export_page_offers_the_files_bundles_and_keeps_the_file(
    admin_client: Client,
) -> None:
    """The walkthrough: a free-text bundle box, and the chosen file dropped after an error."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    form = admin_client.get("/policy/export/descriptor/").content.decode()
    assert not find_all(form, "input", name="bundle", type="text")
    admin_client.post("/policy/import/", {"op": "apply", "text": DESCRIPTOR, "base_revision": "0"})
    upload = SimpleUploadedFile("bundles.yaml", TWO_POLICIES.encode(), "application/yaml")
    response = admin_client.post("/policy/export/descriptor/", {"file": upload})
    assert response.status_code == 422
    page = response.content.decode()
    assert "--bundle" not in page_text(page)
    picker = find(page, "select", name="bundle")
    assert [option.attrs["value"] for option in picker.find_all("option")] == [
        "agent@1",
        "other@1",
    ]
    # What the browser sends back from the hidden text area (its first line break is markup).
    kept = find(page, "textarea", name="text", hidden=None).value
    assert kept == TWO_POLICIES
    # Picking a bundle and sending the form again needs no new upload.
    response = admin_client.post("/policy/export/descriptor/", {"text": kept, "bundle": "agent@1"})
    assert response.status_code == 200
    assert response["X-Bundle"] == "agent@1"
