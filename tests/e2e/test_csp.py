"""The Content-Security-Policy in a real browser: pages send it, chromium reports no violation on
the pages that run scripts (htmx, the live websocket, the import size check), and the scripts
moved out of the templates still work."""

from __future__ import annotations

import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from tests.e2e.conftest import LiveServer


@pytest.fixture
def violations(signed_in_page: Page) -> list[str]:
    """Console messages chromium prints for anything the CSP blocked."""
    seen: list[str] = []

    def note(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            seen.append(message.text)

    signed_in_page.on("console", note)
    return seen


def test_pages_run_under_the_csp_without_a_violation(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, violations: list[str]
) -> None:
    page = signed_in_page
    for path in ("/", "/live/", "/policy/", "/policy/import/", "/tokens/", "/api/docs"):
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None
        assert response.status == 200, path
        directives = dict(
            d.strip().split(" ", 1) for d in response.headers["content-security-policy"].split(";")
        )
        assert directives["script-src"] == "'self'", path
        page.wait_for_load_state("networkidle")
    page.goto(f"{live_server.url}/live/")
    # The websocket is allowed by connect-src 'self': the stream says it is live.
    expect(page.locator("#stream-status")).to_have_text("live")
    assert violations == []


def test_the_import_size_check_runs_from_its_static_file(
    signed_in_page: Page, live_server: LiveServer, violations: list[str]
) -> None:
    page = signed_in_page
    page.goto(f"{live_server.url}/policy/import/")
    area = page.locator("#import-text")
    limit = int(area.get_attribute("data-max-bytes") or "0")
    assert limit > 0
    area.fill("a" * (limit + 1))
    expect(page.locator("#import-size")).to_contain_text("The text is too large")
    assert page.evaluate("document.getElementById('import-text').validity.customError")
    area.fill("agents: {}\n")
    expect(page.locator("#import-size")).to_have_text("")
    assert violations == []
