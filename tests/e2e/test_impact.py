"""Impact and regression suites in a real browser (issue 13): change a trait, read what it does to
the rounds the simulator recorded, open an affected round, and publish while a regression case
fails only through the override, which the audit log shows."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

from playwright.sync_api import Page, Route, expect

from tests.e2e.conftest import SIMULATOR_S, LiveServer

Simulator = Callable[..., subprocess.Popen[str]]
#: A seed no other browser test posts (the server is shared).
IMPACT_SEED = "33"
CASE = "the background job starts early"
#: One early-eligible call, alone: the runtime starts it while the model is still generating.
EARLY_ROUND = {
    "turn_id": "case-early",
    "iteration": 0,
    "attempts": [
        [
            {
                "action": "call_tool",
                "tool_id": "workspace_jobs.launch_background_job",
                "params": {"job": "triage alerts"},
            }
        ]
    ],
}


def _publish_form(page: Page, message: str, *, override: bool) -> None:
    box = page.get_by_label(re.compile("I have read the warnings"))
    if box.count():
        box.check()
    if override:
        page.get_by_label(re.compile("Publish anyway: override the failing cases")).check()
    page.get_by_label(re.compile(r"^Message")).fill(message)
    page.get_by_role("button", name="Publish").click()


def test_a_trait_change_shows_its_impact_and_a_failing_case_needs_the_override(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, start_simulator: Simulator
) -> None:
    page, url = signed_in_page, live_server.url
    # The sample in force, and rounds a runtime recorded under it.
    page.goto(f"{url}/policy/publish/")
    if not page.locator(".no-changes").count():
        _publish_form(page, "impact baseline", override=False)
        expect(page).to_have_url(re.compile(r"/policy/versions/\d+/$"))
    process = start_simulator("--rounds", "8", "--rate", "10", "--seed", IMPACT_SEED, "--quiet")
    _, err = process.communicate(timeout=SIMULATOR_S)
    assert process.returncode == 0, err

    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": csrf, "Referer": f"{url}/"}
    saved = page.request.post(
        f"{url}/policy/agents/main/suite/",
        form={"op": "add", "name": CASE, "round": json.dumps(EARLY_ROUND)},
        headers=headers,
        max_redirects=0,
    )
    assert saved.status == 302, saved.text()
    try:
        page.goto(f"{url}/policy/agents/main/suite/")
        expect(page.locator("#suite-cases")).to_contain_text("all pass under the draft")

        # Change a trait in the tool editor: the background job is no longer neutral.
        page.goto(f"{url}/policy/agents/main/connections/0/tools/launch_background_job/")
        page.get_by_label("neutral", exact=True).uncheck()
        page.get_by_label("exploration", exact=True).check()
        page.get_by_role("button", name="Save").click()
        expect(page).to_have_url(f"{url}/policy/agents/main/")
        expect(page.locator("#suite-status")).to_contain_text("1 failing under the draft")

        # The publish page says what the change does to the recorded rounds.
        page.goto(f"{url}/policy/publish/")
        impact = page.locator("#impact")
        expect(impact).to_contain_text("This change alters")
        expect(impact).to_contain_text("early starts lost")
        expect(page.locator("#failing-cases")).to_contain_text("1 regression case fails")
        expect(page.locator(".failing-cases")).to_contain_text(CASE)

        # An affected round opens on its own page.
        link = impact.locator("table.impact-rounds a").first
        href = link.get_attribute("href")
        assert href
        link.click()
        expect(page).to_have_url(f"{url}{href}")
        expect(page.locator("h1")).to_contain_text("Round")

        # Publishing is refused while the case fails, then goes through with the override.
        page.goto(f"{url}/policy/publish/")
        _publish_form(page, "the background job explores", override=False)
        expect(page.locator("#publish-refusal")).to_contain_text("1 regression case fails under")
        _publish_form(page, "the background job explores", override=True)
        expect(page).to_have_url(re.compile(r"/policy/versions/\d+/$"))
        page.goto(f"{url}/audit/?action=suite.override")
        expect(page.locator("main")).to_contain_text("published with 1 failing regression case")
    finally:
        page.request.post(
            f"{url}/policy/agents/main/suite/",
            form={"op": "remove", "name": CASE},
            headers=headers,
            max_redirects=0,
        )


def test_a_large_window_replays_step_by_step_with_progress_and_can_be_cancelled(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, start_simulator: Simulator
) -> None:
    page, url = signed_in_page, live_server.url
    process = start_simulator("--rounds", "9", "--rate", "10", "--seed", "34", "--quiet")
    _, err = process.communicate(timeout=SIMULATOR_S)
    assert process.returncode == 0, err

    # Steps of 3 rounds: the bar fills, then the whole window's summary is shown.
    page.goto(f"{url}/policy/impact/?baseline=draft&candidate=draft&chunk=3")
    page.get_by_label("Newest rounds").fill("9")
    page.get_by_role("button", name="Replay").click()
    expect(page.locator("#impact-status")).to_have_text("Done: 9 rounds read.")
    expect(page.locator("#impact-bar")).to_have_attribute("max", "9")
    assert page.locator("#impact-bar").evaluate("bar => bar.value") == 9
    expect(page.locator("#impact-summary")).to_contain_text("This change alters none of the last")

    # The second step never answers: Cancel stops the run and says how far it got.
    answered: list[str] = []

    def hold_after_first(route: Route) -> None:
        if answered:
            return  # left pending: the page's Cancel aborts it
        answered.append(route.request.url)
        route.continue_()

    page.route("**/api/v1/policy/impact", hold_after_first)
    page.goto(f"{url}/policy/impact/?baseline=draft&candidate=draft&chunk=3")
    page.get_by_label("Newest rounds").fill("9")
    page.get_by_role("button", name="Replay").click()
    expect(page.locator("#impact-status")).to_have_text("Replayed 3 of 9 rounds.")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#impact-status")).to_have_text(
        "Cancelled after 3 rounds: the figures below cover those."
    )
    page.unroute("**/api/v1/policy/impact")
