"""Tool discovery in a real browser: an MCP connection whose server mixes reads and writes under
one ``*`` trait; discover its tools (a real SDK server started over stdio), see
``mcp-wildcard-mixed``, apply the suggestions, see their impact on simulator rounds, publish.
And Discover from the agent page, beside each MCP connection (editor; refused for a viewer)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import SAMPLE_POLICY, SIMULATOR_S, LiveServer, log_in
from tests.e2e.test_governance import _publish

SERVER = Path(__file__).resolve().parents[1] / "discovery" / "mcp_servers.py"


#: An MCP connection to the allowlisted ``mixed`` server (reads and writes) under one ``*`` trait.
FILES_WILDCARD: dict[str, Any] = {
    "kind": "mcp",
    "server_id": "files",
    "alias": "fs",
    "allowed": ["*"],
    "tool_traits": {"*": {"strategy": ["exploration"]}},
}


def _policy_with(agent: str, servers: dict[str, str], tools: list[dict[str, Any]]) -> bytes:
    """The sample policy plus MCP ``servers`` (server id → kind of test server, over stdio) and
    an agent ``agent`` with ``tools``."""
    data: dict[str, Any] = yaml.safe_load(SAMPLE_POLICY.read_text())
    consumer = data["surfaces"]["as_consumer"]
    consumer["mcp"] = {
        "services": {
            server_id: {"command": sys.executable, "args": [str(SERVER), kind]}
            for server_id, kind in servers.items()
        }
    }
    consumer["agents"][agent] = {"tools": tools}
    return yaml.safe_dump(data, sort_keys=False).encode()


def _import_draft(page: Page, live_server: LiveServer, text: bytes) -> None:
    """Replace the draft with ``text`` through the API, as the signed-in user."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    imported = page.request.post(
        f"{live_server.url}/api/v1/policy/import?dry_run=false",
        data=text,
        headers={"Content-Type": "application/yaml", "X-CSRFToken": token},
    )
    assert imported.status == 200, imported.text()


def test_discover_see_the_mixed_wildcard_apply_suggestions_see_impact_publish(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, start_simulator: Any
) -> None:
    page = signed_in_page
    _import_draft(page, live_server, _policy_with("disco", {"files": "mixed"}, [FILES_WILDCARD]))

    # Discover the server's tools from the connection's page.
    connection = f"{live_server.url}/policy/agents/disco/connections/0/edit/"
    page.goto(connection)
    page.get_by_role("button", name="Discover tools").click()
    expect(page.locator("#discovery-notice")).to_contain_text("Discovered 5 tool(s) on 1 page(s)")
    table = page.locator("table.discovered")
    expect(table).to_contain_text("readOnlyHint=true · explicit")
    expect(table).to_contain_text("destructiveHint=true · default")

    # The agent page says the wildcard covers reads and writes.
    page.goto(f"{live_server.url}/policy/agents/disco/")
    expect(page.get_by_text("mcp-wildcard-mixed").first).to_be_visible()

    # A version in force, and rounds recorded under it by the simulator.
    _publish(page, live_server, "disco baseline")
    simulator = start_simulator("--agent", "disco", "--rounds", "25", "--seed", "7", "--rate", "50")
    simulator.communicate(timeout=SIMULATOR_S)
    assert simulator.returncode == 0

    # Apply the suggestions: an ordinary edit of the draft.
    page.goto(connection)
    page.get_by_role("button", name="Apply suggestions").click()
    expect(page.locator("#discovery-notice")).to_contain_text("Applied the suggested traits")
    expect(page.locator("#discovery-notice")).to_contain_text("stat")  # rests only on defaults
    page.goto(f"{live_server.url}/policy/agents/disco/")
    expect(page.get_by_text("mcp-wildcard-mixed")).to_have_count(0)

    # The publish page replays the recorded rounds under both; then publish.
    page.goto(f"{live_server.url}/policy/publish/")
    impact = page.locator("#impact")
    expect(impact).to_contain_text(re.compile(r"recorded round"))
    expect(impact).not_to_contain_text("No recorded round")
    _publish(page, live_server, "concrete traits from the server's annotations")
    expect(page.get_by_role("heading", level=1)).to_contain_text("in force")


def _discoveries(live_server: LiveServer) -> int:
    """How many discoveries ran or were refused (each is one ``mcp.discover`` audit entry)."""
    code = (
        "from audit.models import AuditEntry; "
        "print(AuditEntry.objects.filter(action='mcp.discover').count())"
    )
    return int(live_server.manage("shell", "-v0", "-c", code).stdout.strip())


def test_discover_from_the_agent_page_beside_each_connection(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, browser: Browser
) -> None:
    page = signed_in_page
    # Agent finder: the allowlisted mixed server (fs) and a command the live server does not
    # allow (pg: the same script, another argument).
    paged = {"kind": "mcp", "server_id": "pages", "alias": "pg", "allowed": ["*"]}
    servers = {"files": "mixed", "pages": "paged"}
    _import_draft(page, live_server, _policy_with("finder", servers, [FILES_WILDCARD, paged]))
    agent_url = f"{live_server.url}/policy/agents/finder/"

    # A viewer sees the button; pressing it is refused and runs nothing.
    before = _discoveries(live_server)
    viewer = f"viewer{time.monotonic_ns()}"
    live_server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; from accounts.roles import role_set; "
        f"role_set(get_user_model().objects.create_user({viewer!r}, password='viewer-pw-123'), "
        "'viewer')",
    )
    context = browser.new_context()
    try:
        viewer_page = context.new_page()
        log_in(viewer_page, live_server, (viewer, "viewer-pw-123"))
        viewer_page.goto(agent_url)
        viewer_page.get_by_role("button", name="Discover the tools of fs").click()
        expect(viewer_page.get_by_role("heading", level=1)).to_have_text("Not allowed")
    finally:
        context.close()
    assert _discoveries(live_server) == before
    page.goto(agent_url)
    expect(page.get_by_text("mcp-wildcard-mixed")).to_have_count(0)  # nothing listed yet

    # The editor discovers fs's tools: the result stands beside fs's button, on the agent page.
    page.get_by_role("button", name="Discover the tools of fs").click()
    result = page.locator("#connection-0 .discover-result")
    expect(result).to_contain_text("Discovered 5 tool(s) on 1 page(s)")
    expect(page.get_by_role("heading", level=1)).to_contain_text("finder")
    expect(page.locator("#connection-1 .discover-result")).to_have_count(0)
    # What the listing taught the agent page: the wildcard covers reads and writes.
    expect(page.get_by_text("mcp-wildcard-mixed").first).to_be_visible()
    result.get_by_role("link").click()
    expect(page.locator("table.discovered")).to_contain_text("readOnlyHint=true · explicit")

    # pg's command is not allowlisted: the refusal stands beside pg's button, nothing ran.
    page.goto(agent_url)
    page.get_by_role("button", name="Discover the tools of pg").click()
    refusal = page.locator("#connection-1 .discover-result")
    expect(refusal).to_contain_text("is not on TRAITDECK_MCP_STDIO_COMMANDS")
    expect(refusal).to_have_attribute("role", "alert")
    expect(page.locator("#connection-0 .discover-result")).to_have_count(0)
    # The URL the form left in the address bar, opened again, leads to the agent page there.
    expect(page).to_have_url(re.compile(r"/discover-from-agent/$"))
    page.goto(page.url)
    expect(page).to_have_url(f"{agent_url}#connection-1")
