"""Discovery in the browser's words (the third walkthrough): the disabled button names the
settings with a value and a link, a saved URL's origin is named as the value to allowlist, the
agent page offers Discover on each MCP connection, and every URL the discovery forms leave in
the address bar opens."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.markup import find, find_all
from tests.observe.ingest_support import load_sample_into_draft

pytestmark = pytest.mark.django_db

#: The sample's browser connection: an MCP server with no config in the policy.
BROWSER = "/policy/agents/main/connections/1"


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
    assert 'id="discovery-settings"' in glossary
    assert "TRAITDECK_MCP_CREDENTIALS" in glossary


def test_a_saved_url_names_its_origin_as_the_value_to_allowlist(editor_client: Client) -> None:
    load_sample_into_draft()
    response = editor_client.post(
        f"{BROWSER}/mcp-server/", {"source_url": "https://mcp.example.org/mcp", "transport": "http"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Set a discovery source below" not in page
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
    links = find_all(page, "a", class_="discover-link")
    assert [link.attrs["href"] for link in links] == [f"{BROWSER}/edit/#discovery"]
    assert links[0].text.strip() == "Discover"
