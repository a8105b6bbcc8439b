"""What a new admin tripped over in a walkthrough, checked where they would notice it."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer

WILDCARD_EDITOR = "/policy/agents/main/connections/1/tools/*/"


def codes(page: Page) -> list[str]:
    return page.locator("#tool-diagnostics li.diag").evaluate_all(
        "items => items.map(li => li.dataset.code + ' ' + li.textContent.replace(/\\s+/g, ' '))"
    )


def test_it_previews_every_diagnostic_a_wildcard_save_produces_riskiest_first(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.goto(f"{live_server.url}{WILDCARD_EDITOR}")
    check = page.locator("#tool-diagnostics")
    page.get_by_label("neutral", exact=True).check()
    page.get_by_label("Start while the model is still generating").check()
    # ``browser.click`` is not safe to repeat: starting it early is the risky news, shown before
    # the edit is saved, marked, and above every warning that changes nothing.
    early = check.locator('li.diag[data-code="early-without-idempotency"]')
    expect(early).to_contain_text("mcp.browser.click")
    expect(early).to_contain_text("side effects")
    ranks = check.locator("li.diag").evaluate_all(
        "items => items.map(li => [li.classList.contains('error') ? 0 :"
        " li.classList.contains('warning') ? 1 : 2,"
        " li.classList.contains('risk-high') ? 0 : li.classList.contains('risk-low') ? 2 : 1])"
    )
    assert ranks == sorted(ranks)
    previewed = sorted(code.split(" ")[0] for code in codes(page))
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".saved-note")).to_be_visible()
    page.goto(f"{live_server.url}{WILDCARD_EDITOR}")
    expect(check.locator('li.diag[data-code="early-without-idempotency"]')).to_be_visible()
    assert sorted(code.split(" ")[0] for code in codes(page)) == previewed


def publish_all(page: Page, live_server: LiveServer, message: str) -> None:
    """Whatever the draft holds goes into force (the shared server may hold other tests')."""
    page.goto(f"{live_server.url}/policy/publish/")
    if page.locator(".no-changes").count() or page.locator("#publish-errors").count():
        return
    box = page.get_by_label(re.compile("I have read the warnings"))
    if box.count():
        box.check()
    page.get_by_label(re.compile(r"^Message")).fill(message)
    page.get_by_role("button", name="Publish").click()
    expect(page).to_have_url(re.compile(r"/policy/versions/\d+/$"))


def change_a_timeout(page: Page, live_server: LiveServer) -> None:
    page.goto(f"{live_server.url}/policy/agents/main/connections/0/tools/search/")
    page.get_by_text("Advanced: the four execution fields").click()
    timeout = page.get_by_label("Timeout (s)")
    timeout.fill("7" if timeout.input_value() != "7" else "8")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".saved-note")).to_be_visible()


def test_it_shows_a_diff_single_spaced_folded_with_the_action_in_reach(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.set_viewport_size({"width": 800, "height": 900})
    publish_all(page, live_server, "baseline")
    change_a_timeout(page, live_server)
    page.goto(f"{live_server.url}/policy/publish/")
    diff = page.locator("#version-diff")
    lines = diff.locator("span:visible")
    first, second = lines.nth(0).bounding_box(), lines.nth(1).bounding_box()
    assert first
    assert second
    assert second["y"] - first["y"] < 1.8 * first["height"] <= 40  # one line, not two
    # The unchanged lines far from the change are folded; "show more" reveals them.
    fold = diff.locator("details.diff-fold").first
    expect(fold.locator("summary")).to_contain_text(re.compile(r"show \d+ unchanged line"))
    hidden = fold.locator("span").first
    expect(hidden).to_be_hidden()
    fold.locator("summary").click()
    expect(hidden).to_be_visible()
    # The page is taller than the window, and the action is on screen at the top and the end.
    assert page.evaluate("document.documentElement.scrollHeight") > 900
    button = page.get_by_role("button", name="Publish")
    expect(button).to_be_in_viewport()
    page.mouse.wheel(0, 600)
    expect(button).to_be_in_viewport()


def test_it_discards_the_draft_and_starts_a_draft_from_a_version(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    publish_all(page, live_server, "baseline")
    in_force = page.request.get(f"{live_server.url}/api/v1/versions").json()["in_force"]
    change_a_timeout(page, live_server)
    page.goto(f"{live_server.url}/policy/")
    standing = page.locator(".draft-standing")
    expect(standing).to_contain_text(f"differs from version {in_force}")
    page.get_by_text("Discard the draft…").click()
    page.get_by_role("button", name=f"Discard draft: reset to version {in_force}").click()
    expect(page.locator(".messages")).to_contain_text("The draft is now the version in force")
    expect(standing).to_contain_text(f"The draft is version {in_force}, which is in force")
    page.goto(f"{live_server.url}/audit/?action=draft.discard")
    expect(page.locator("main")).to_contain_text("draft.discard")

    # Start a draft from an older version: it becomes the draft, nothing is published.
    change_a_timeout(page, live_server)
    publish_all(page, live_server, "newer")
    page.goto(f"{live_server.url}/policy/versions/{in_force}/")
    page.get_by_role("button", name=f"Edit from version {in_force}").click()
    expect(page.locator(".messages")).to_contain_text(f"The draft is now version {in_force}")
    expect(standing).to_contain_text("unpublished changes")
