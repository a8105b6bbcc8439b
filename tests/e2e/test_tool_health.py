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
    from policy.domain.yaml_io import load_policy
    from simulator.runtime import Simulator

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
    page.get_by_role("link", name="p99", exact=True).click()
    expect(page.locator("th[aria-sort='descending']")).to_contain_text("p99")
    # The p99 column: the values read largest first, tools with no calls last.
    cells = page.locator("#tools-table tbody tr td[data-col='p99_ms']").all_inner_texts()
    numbers = [_ms(text) for text in cells if text.strip() not in ("—", "")]
    assert numbers, cells
    assert numbers == sorted(numbers, reverse=True)
    row = page.locator(f"#tools-table tbody tr[data-tool='{SLOWING}']")
    expect(row).to_contain_text("async-candidate")
    assert _ms(row.locator("td[data-col='p99_ms']").inner_text()) > 10_000  # past 10 s

    # The tool that times out 40 % of the time at 2 s: its timed-out calls count at their
    # limit, so its p99 and max say "≥ 2,000 ms (limit)" (the walkthrough saw max 1,930 ms).
    closing = page.locator(f"#tools-table tbody tr[data-tool='{AT_LIMIT}']")
    expect(closing.locator("td[data-col='p99_ms']")).to_have_text("≥ 2,000 ms (limit)")
    expect(closing.locator("td[data-col='max_ms']")).to_have_text("≥ 2,000 ms (limit)")
    expect(page.locator("#tools-table")).to_contain_text("“≈”: read from a histogram bin")

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
    # Its chart: p95 and the timeout rate over the window, the 2 s limit drawn as a line.
    chart = page.locator("svg.tool-chart")
    expect(chart).to_be_visible()
    expect(chart.locator(".limit-line")).to_contain_text("limit 2 s")
    expect(chart.locator("polyline.series-p95")).to_have_count(1)
    expect(chart.locator("polyline.series-timeout")).to_have_count(1)
    tight = page.locator("li[data-code='timeout-too-tight']")
    expect(tight).to_contain_text("at the limit")
    tight.get_by_role("link", name="Open the editor with this filled in").click()
    expect(page.locator("input[name='timeout_s']")).to_have_value("4")
    expect(page.locator("#suggested-note")).to_contain_text("the draft has 2")
    expect(page.locator("#proposed-impact")).to_contain_text(
        re.compile(r"With timeout_s: 4, \d+ of the \d+ finished calls recorded in the last 24h")
    )
    expect(page.locator("#proposed-impact")).to_contain_text("timed out at the limit in force")


def _ms(text: str) -> float:
    """A figure as the table shows it ("≈ 12,345 ms", "≥ 2,000 ms (limit)", "200.5 ms")."""
    found = re.search(r"[\d,]+(?:\.\d+)?", text)
    assert found is not None, text
    return float(found.group().replace(",", ""))


def test_a_tool_with_few_calls_says_why_it_has_no_advice_and_is_watched(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, simulator_token: str
) -> None:
    """The walkthrough: 3 timeouts in 5 calls showed "—" and "No advice: the calls support no
    change"; the reason was TRAITDECK_HEALTH_MIN_CALLS."""
    page, url = signed_in_page, live_server.url
    # A tool of its own (the live server's database keeps the other test's traffic).
    tool = "mcp.browser.screenshot"
    at = (datetime.now(UTC) - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    events = []
    for n in range(5):
        base = {
            "event_id": f"00000000-0000-4000-8000-{n + 77:012d}",
            "ts": at,
            "agent": "main",
            "turn_id": f"w{n}",
            "iteration": 0,
            "action_index": 0,
            "tool_id": tool,
            "tool_call_id": "c",
        }
        if n < 3:
            base.update(type="tool.timeout", limit_ms=2000, elapsed_ms=2010, async_alternative=None)
        else:
            base.update(type="tool.finished", status="ok", duration_ms=700.0)
        events.append(base)
    response = page.request.post(
        f"{url}/api/v1/events",
        data=json.dumps({"events": events}),
        headers={"Authorization": f"Bearer {simulator_token}", "Content-Type": "application/json"},
    )
    assert response.status == 200, response.text()
    page.goto(f"{url}/live/tools/?agent=main")
    row = page.locator(f"#tools-table tbody tr[data-tool='{tool}']")
    expect(row.locator("td.advice-cell")).to_have_text("watch: 3 of 5 calls timed out")
    row.get_by_role("link", name=tool).click()
    reason = page.locator(".quiet-reason")
    expect(reason).to_contain_text("watch: 3 of 5 calls timed out")
    expect(reason).to_contain_text("No advice yet: 5 of 20 calls needed before advice")
    expect(page.locator("#tool-health-panel")).not_to_contain_text("the calls support no change")
