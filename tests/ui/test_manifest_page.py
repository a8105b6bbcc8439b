"""An agent's manifest page: view, download, replace, remove; entries used / overridden by
config / unused (issue 12)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from policy.domain.yaml_io import load_policy
from policy.selectors import draft_state, manifest_rows
from policy.services import draft_replace, manifest_upload
from tests.conftest import make_user
from tests.markup import assert_alert, find, find_all, page_text, text_of

pytestmark = pytest.mark.django_db

POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - {kind: mcp, server_id: browser, alias: browser, allowed: [open_page, click],
             tool_traits: {open_page: {strategy: [exploitation]}}}
"""
MANIFEST = {
    "mcp.browser.click": {"tool_traits": {"strategy": ["exploration"], "cost": "low"}},
    "mcp.browser.open_page": {"tool_traits": {"strategy": ["exploration"]}},
    "mcp.browser.gone": {"tool_traits": {"strategy": ["neutral"]}},
}
URL = "/policy/agents/main/manifest/"


@pytest.fixture
def web(admin_client: Client) -> Client:
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    manifest_upload(agent="main", data=MANIFEST)
    return admin_client


def entry(text: str, tool_id: str) -> str:
    """What the manifest entry's row reads."""
    return find(text, "tr", data_tool=tool_id).text


def test_each_entry_says_whether_the_policy_uses_it(web: Client) -> None:
    text = web.get(URL).content.decode()
    assert "used" in entry(text, "mcp.browser.click")
    assert "overridden by config" not in entry(text, "mcp.browser.click")
    opened = entry(text, "mcp.browser.open_page")
    assert "overridden by config" in opened
    assert "exploitation" in opened  # what the runtime reads instead
    assert "config agents.main.tools[0].tool_traits.open_page" in opened
    assert "unused: no tool of this agent has this id" in entry(text, "mcp.browser.gone")
    assert "['" not in page_text(text)  # never a Python list


def test_download_gives_the_json_as_uploaded(web: Client) -> None:
    response = web.get(URL + "?download=1")
    assert response.status_code == 200
    assert 'filename="manifest-main.json"' in response["Content-Disposition"]
    assert json.loads(response.content) == MANIFEST


def test_replace_and_remove_change_the_manifest_and_the_revision(web: Client) -> None:
    before = draft_state().revision
    replacement = {"mcp.browser.click": {"tool_traits": {"strategy": ["neutral"]}}}
    response = web.post(
        URL, {"page": "manifest", "base_revision": before, "text": json.dumps(replacement)}
    )
    assert response.status_code == 302
    assert manifest_rows()["main"].data == replacement
    page = web.get(URL).content.decode()
    assert_alert(page, "Replaced the manifest of main.")
    response = web.post(URL, {"op": "remove", "base_revision": before + 1})
    assert response.status_code == 302
    assert "main" not in manifest_rows()
    assert draft_state().revision == before + 2
    said = text_of(web.get(URL).content.decode(), "p", class_="manifest-state")
    assert said.startswith("No manifest uploaded")


def test_a_stale_remove_changes_nothing(web: Client) -> None:
    stale = draft_state().revision - 1
    response = web.post(URL, {"op": "remove", "base_revision": stale})
    assert response.status_code == 409
    assert "main" in manifest_rows()


def test_bad_json_is_refused_and_keeps_the_manifest(web: Client) -> None:
    revision = draft_state().revision
    response = web.post(URL, {"page": "manifest", "base_revision": revision, "text": "{nope"})
    assert response.status_code == 422
    assert_alert(response.content.decode(), "not valid JSON")
    assert manifest_rows()["main"].data == MANIFEST


def test_a_viewer_sees_the_page_but_no_replace_form(client: Client, web: Client) -> None:
    make_user("vic", "viewer", password="pw-vic-123")
    client.login(username="vic", password="pw-vic-123")
    response = client.get(URL)
    assert response.status_code == 200
    assert find_all(response.content.decode(), "tr", data_tool="mcp.browser.click")
    assert not find_all(response.content.decode(), id="manifest-replace")
    assert client.post(URL, {"op": "remove", "base_revision": 1}).status_code == 403
