"""Tool discovery in a real browser: an MCP connection whose server mixes reads and writes under
one ``*`` trait; discover its tools (a real SDK server started over stdio), see
``mcp-wildcard-mixed``, apply the suggestions, see their impact on simulator rounds, publish."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml
from playwright.sync_api import Page, expect

from tests.e2e.conftest import SAMPLE_POLICY, SIMULATOR_S, LiveServer
from tests.e2e.test_governance import _publish

SERVER = Path(__file__).resolve().parents[1] / "discovery" / "mcp_servers.py"


def _policy() -> bytes:
    data: dict[str, Any] = yaml.safe_load(SAMPLE_POLICY.read_text())
    consumer = data["surfaces"]["as_consumer"]
    consumer["mcp"] = {
        "services": {"files": {"command": sys.executable, "args": [str(SERVER), "mixed"]}}
    }
    consumer["agents"]["disco"] = {
        "tools": [
            {
                "kind": "mcp",
                "server_id": "files",
                "alias": "fs",
                "allowed": ["*"],
                "tool_traits": {"*": {"strategy": ["exploration"]}},
            }
        ]
    }
    return yaml.safe_dump(data, sort_keys=False).encode()


def test_discover_see_the_mixed_wildcard_apply_suggestions_see_impact_publish(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, start_simulator: Any
) -> None:
    page = signed_in_page
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    imported = page.request.post(
        f"{live_server.url}/api/v1/policy/import?dry_run=false",
        data=_policy(),
        headers={"Content-Type": "application/yaml", "X-CSRFToken": token},
    )
    assert imported.status == 200, imported.text()

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
