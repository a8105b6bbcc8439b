"""Discovery in the browser's words (the third walkthrough): the disabled button names the
settings with a value and a link, a saved URL's origin is named as the value to allowlist, the
agent page offers Discover on each MCP connection, and every URL the discovery forms leave in
the address bar opens."""

from __future__ import annotations

import copy
import json

import pytest
from django.test import Client, override_settings

from audit.models import AuditEntry
from policy.models import AgentManifest
from policy.selectors import draft_state
from policy.services import draft_change
from tests.discovery.conftest import stdio_argv
from tests.markup import find, find_all, text_of, texts
from tests.observe.ingest_support import load_sample_into_draft

pytestmark = pytest.mark.django_db

#: The sample's browser connection: an MCP server with no config in the policy.
BROWSER = "/policy/agents/main/connections/1"
MIXED = stdio_argv("mixed")


def test_the_disabled_button_names_the_settings_with_a_value_and_a_link(
    viewer_client: Client,
) -> None:
    load_sample_into_draft()
    page = viewer_client.get(f"{BROWSER}/edit/").content.decode()
    why = find(page, id="discover-why")
    assert "TRAITDECK_MCP_HTTP_HOSTS=https://mcp.example.com:443" in why.text
    assert "TRAITDECK_MCP_STDIO_COMMANDS=" in why.text
    (link,) = why.find_all("a")
    assert link.attrs["href"] == "/policy/glossary/#discovery-settings"
    glossary = viewer_client.get(link.attrs["href"]).content.decode()
    settings = find(glossary, "dt", id="discovery-settings")
    assert settings.text == "discovery settings"
    assert "TRAITDECK_MCP_CREDENTIALS" in texts(glossary, "code")


def test_a_saved_url_names_its_origin_as_the_value_to_allowlist(editor_client: Client) -> None:
    load_sample_into_draft()
    response = editor_client.post(
        f"{BROWSER}/mcp-server/", {"source_url": "https://mcp.example.org/mcp", "transport": "http"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Set a discovery source below" not in text_of(page, "section", id="discovery")
    assert "https://mcp.example.org/mcp" in find(page, "p", class_="discovery-source").text
    hint = find(page, "p", class_="allowlist-hint")
    assert "TRAITDECK_MCP_HTTP_HOSTS=https://mcp.example.org:443" in hint.text


def test_every_url_the_discovery_forms_leave_in_the_address_bar_opens(
    viewer_client: Client,
) -> None:
    """After a POST the page is shown at the form's URL; opened again it led to 403 ("not in
    the access table")."""
    load_sample_into_draft()
    for action in ("mcp-server", "discover", "suggestions"):
        response = viewer_client.get(f"{BROWSER}/{action}/")
        assert response.status_code == 302, action
        assert response["Location"] == f"{BROWSER}/edit/#discovery"


def test_the_agent_page_offers_discover_on_each_mcp_connection(viewer_client: Client) -> None:
    load_sample_into_draft()
    page = viewer_client.get("/policy/agents/main/").content.decode()
    forms = find_all(page, "form", class_="discover-form")
    assert [form.attrs["action"] for form in forms] == [
        "/policy/agents/main/connections/1/discover-from-agent/"
    ]
    assert forms[0].attrs["method"] == "post"
    assert forms[0].find("button").text.strip() == "Discover"


def _mixed_server() -> None:
    """The sample plus an agent ``disco`` whose MCP connection is the real ``mixed`` server."""
    load_sample_into_draft()
    state = draft_state()
    doc = copy.deepcopy(state.data)
    consumer = doc["surfaces"]["as_consumer"]
    consumer["mcp"] = {"services": {"files": {"command": MIXED[0], "args": list(MIXED[1:])}}}
    consumer["agents"]["disco"] = {
        "tools": [
            {"kind": "mcp", "server_id": "browser", "alias": "web"},
            {"kind": "mcp", "server_id": "files", "alias": "fs", "allowed": ["*"]},
        ]
    }
    draft_change(edit=lambda _old: doc, base_revision=state.revision)


AGENT_DISCOVER = "/policy/agents/disco/connections/{}/discover-from-agent/"


def test_discover_on_the_agent_page_runs_and_says_so_beside_that_connection(
    editor_client: Client,
) -> None:
    _mixed_server()
    with override_settings(TRAITDECK_MCP_STDIO_COMMANDS=json.dumps([list(MIXED)])):
        response = editor_client.post(AGENT_DISCOVER.format(1))
    assert response.status_code == 200
    page = response.content.decode()
    assert find(page, "h1").text.split() == ["Agent", "disco"]
    card = find(page, "article", id="connection-1")
    result = card.find("p", class_="discover-result")
    assert result.text.startswith("Discovered 5 tool(s) on 1 page(s)")
    assert result.find("a").attrs["href"] == "/policy/agents/disco/connections/1/edit/#discovery"
    assert find(page, "article", id="connection-0").find_all("p", class_="discover-result") == []
    manifest = AgentManifest.objects.get(agent="disco").data
    assert {key for key in manifest if key.startswith("mcp.fs.")} == {
        f"mcp.fs.{name}" for name in ("read_file", "list_dir", "stat", "write_file", "delete_file")
    }


def test_a_refused_discover_on_the_agent_page_says_why_beside_that_connection(
    editor_client: Client,
) -> None:
    _mixed_server()
    response = editor_client.post(AGENT_DISCOVER.format(0))  # browser: no config, no source
    assert response.status_code == 422
    card = find(response.content.decode(), "article", id="connection-0")
    result = card.find("p", class_="discover-result")
    assert result.attrs["role"] == "alert"
    assert "has no config anywhere Traitdeck can read" in result.text
    assert not AgentManifest.objects.filter(agent="disco").exists()


def test_a_viewer_cannot_discover_from_the_agent_page_and_nothing_runs(
    viewer_client: Client,
) -> None:
    _mixed_server()
    with override_settings(TRAITDECK_MCP_STDIO_COMMANDS=json.dumps([list(MIXED)])):
        response = viewer_client.post(AGENT_DISCOVER.format(1))
    assert response.status_code == 403
    assert not AgentManifest.objects.filter(agent="disco").exists()
    assert not AuditEntry.objects.filter(action="mcp.discover").exists()
    # The URL the form leaves in the address bar opens the agent page at that connection.
    opened = viewer_client.get(AGENT_DISCOVER.format(1))
    assert opened.status_code == 302
    assert opened["Location"] == "/policy/agents/disco/#connection-1"
