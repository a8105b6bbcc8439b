"""Tool health in a real browser: the Tools view over twenty minutes of simulated demo traffic,
sorted by p99, the slowing tool's advice followed into its editor with the value filled in."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.conftest import SAMPLE_POLICY, LiveServer

SLOWING = "workspace_jobs.export_report"
AT_LIMIT = "mcp.browser.close"


def _demo_traffic(minutes: int = 20) -> list[dict[str, Any]]:
    """What ``make demo`` posts in its first ``minutes`` (0.5 rounds a second), ending now: the
    simulator's own rounds, timed as they would have been."""
    from observe.domain.simulator import Simulator
    from policy.domain.yaml_io import load_policy

    data = load_policy(SAMPLE_POLICY.read_bytes()).data
    simulator = Simulator(data, seed=2424)
    start = datetime.now(UTC) - timedelta(minutes=minutes)
    events: list[dict[str, Any]] = []
    for n in range(minutes * 30):
        _, found = simulator.next_round(start + timedelta(seconds=2 * n))
        events.extend(found)
    return events


def test_the_slowing_tool_leads_by_p99_and_its_advice_opens_the_editor_filled_in(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, simulator_token: str
) -> None:
    page, url = signed_in_page, live_server.url
    events = _demo_traffic()
    for first in range(0, len(events), 1000):
        response = page.request.post(
            f"{url}/api/v1/events",
            data=json.dumps({"events": events[first : first + 1000]}),
            headers={
                "Authorization": f"Bearer {simulator_token}",
                "Content-Type": "application/json",
            },
        )
        assert response.status == 200, response.text()
        assert response.json()["rejected"] == []

    # Tools, from the top menu; every tool of main, sorted by p99 (slowest first).
    page.goto(f"{url}/live/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Tools").click()
    expect(page.get_by_role("heading", name="Tool health")).to_be_visible()
    page.get_by_label("Agent").select_option("main")
    page.get_by_role("button", name="Show").click()
    page.get_by_role("link", name="p99 ms").click()
    expect(page.locator("th[aria-sort='descending']")).to_contain_text("p99 ms")
    # p99 is the 5th column: the values read largest first, tools with no calls last.
    cells = page.locator("#tools-table tbody tr td:nth-of-type(4)").all_inner_texts()
    numbers = [float(text) for text in cells if text.strip() not in ("—", "")]
    assert numbers, cells
    assert numbers == sorted(numbers, reverse=True)
    row = page.locator(f"#tools-table tbody tr[data-tool='{SLOWING}']")
    expect(row).to_contain_text("async-candidate")
    assert float(row.locator("td:nth-of-type(4)").inner_text()) > 10_000  # past 10 s

    # The slowing tool: its numbers, and the advice with the evidence it rests on.
    row.get_by_role("link", name=SLOWING).click()
    expect(page.locator("h1")).to_contain_text(SLOWING)
    advice = page.locator("li[data-code='async-candidate']")
    expect(advice).to_contain_text("convert it to an async job")
    expect(advice).to_contain_text("launch_background_job")
    expect(advice).to_contain_text(re.compile(r"rests on \d+ calls"))

    # Followed: the editor opens with the suggestion filled in, not saved.
    advice.get_by_role("link", name="Open the editor with this filled in").click()
    expect(page).to_have_url(
        re.compile(r"/policy/agents/main/connections/\d+/tools/export_report/")
    )
    expect(page.locator("#suggested-note")).to_contain_text("Filled in from tool health advice")
    expect(page.locator("select[name='mode']")).to_have_value("async_job")
    # The recorded rounds beside it: the tool's panel on the editor page.
    panel = page.locator("#tool-health-panel")
    expect(panel).to_contain_text("async-candidate")
    expect(panel).to_contain_text("Timeouts")

    # Saving it is an ordinary draft edit; its impact on the recorded rounds is on the
    # impact page (a mode change alters no verdict the runtime gives).
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{url}/policy/agents/main/")
    page.goto(f"{url}/live/tools/main/{SLOWING}/")
    expect(page.locator("#tool-health-panel")).to_contain_text("mode: async_job")

    # The tool that keeps timing out at its 2 s limit: the advice fills in a longer limit, and
    # the panel beside the editor says what that limit does to the calls already recorded.
    page.goto(f"{url}/live/tools/?agent=main&sort=timeout_rate")
    page.locator(f"tr[data-tool='{AT_LIMIT}']").get_by_role("link", name=AT_LIMIT).click()
    tight = page.locator("li[data-code='timeout-too-tight']")
    expect(tight).to_contain_text("at the limit")
    tight.get_by_role("link", name="Open the editor with this filled in").click()
    expect(page.locator("input[name='timeout_s']")).to_have_value("4")
    expect(page.locator("#suggested-note")).to_contain_text("the draft has 2")
    expect(page.locator("#proposed-impact")).to_contain_text(
        re.compile(r"With timeout_s: 4, \d+ of the \d+ finished calls recorded in the last 24h")
    )
    expect(page.locator("#proposed-impact")).to_contain_text("timed out at the limit in force")
