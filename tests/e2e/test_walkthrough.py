"""What a new admin tripped over in a walkthrough, checked where they would notice it."""

from __future__ import annotations

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
