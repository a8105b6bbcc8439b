"""The tool editor says where the form stands (issue 12): no "No problems found" beside a field
error, "unsaved" while typing, "not saved" after a refused Save, and a confirmation after a Save
that went through; the advanced execution fields are selects with their errors beside them."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer

TOOL = "workspace_jobs.search"


def test_saved_unsaved_and_not_saved_states(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.goto(f"{live_server.url}/policy/agents/main/")
    page.locator(f'tr.tool-row[data-tool="{TOOL}"]').get_by_role(
        "link", name=f"Edit {TOOL}"
    ).click()
    expect(page.get_by_role("heading", name=TOOL)).to_be_visible()
    state = page.locator("#save-state")
    check = page.locator("#tool-diagnostics")
    expect(state).to_contain_text("No unsaved changes")

    # Advanced execution fields are proper inputs with readable, separate labels.
    page.get_by_text("Advanced: the four execution fields").click()
    for label in ("Trigger", "Concurrency", "Result dependency", "Replay"):
        field = page.get_by_label(label, exact=True)
        expect(field).to_be_visible()
        assert field.evaluate("el => el.tagName") == "SELECT"
    expect(page.get_by_label("Timeout (s)")).to_have_attribute("type", "number")

    # A bad timeout: the check shows the error and never "No problems found".
    timeout = page.get_by_label("Timeout (s)")
    timeout.fill("-5")
    expect(check.locator(".form-errors")).to_contain_text("positive number of seconds")
    expect(check.get_by_text("No problems found.")).to_have_count(0)
    expect(state).to_contain_text("Unsaved changes")

    # Save refuses it: the error is on the field, the draft is unchanged and the page says so.
    page.get_by_role("button", name="Save").click()
    expect(state).to_contain_text("Not saved")
    expect(timeout).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_timeout_s_error")).to_contain_text("positive number of seconds")
    expect(check.get_by_text("No problems found.")).to_have_count(0)
    expect(page).to_have_url(f"{live_server.url}/policy/agents/main/connections/0/tools/search/")

    # Zero is refused the same way.
    page.get_by_label("Timeout (s)").fill("0")
    expect(check.locator(".form-errors")).to_contain_text("positive number of seconds")
    expect(check.get_by_text("No problems found.")).to_have_count(0)

    # A good value: saved, and the agent page confirms it on the tool's row.
    page.get_by_label("Timeout (s)").fill("9")
    expect(check.locator(".form-errors")).to_have_count(0)
    expect(state).to_contain_text("Unsaved changes")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{live_server.url}/policy/agents/main/")
    note = page.locator(".saved-note")
    expect(note).to_contain_text(f"Saved {TOOL}")
    expect(note).to_contain_text("not published yet")
    row = page.locator(f'tr.tool-row[data-tool="{TOOL}"]')
    expect(row).to_have_class(re.compile(r"just-saved"))
    expect(row).to_contain_text("9 s")


def test_the_none_ticked_hint_shows_only_while_no_strategy_is_ticked(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.goto(f"{live_server.url}/policy/agents/main/connections/0/tools/search/")
    boxes = page.locator(".checks.strategy input[type=checkbox]")
    hint = page.get_by_text("None ticked:")
    ticked = [i for i in range(boxes.count()) if boxes.nth(i).is_checked()]
    assert ticked, "the sample's search tool has a strategy"
    expect(hint).to_be_hidden()
    for i in ticked:
        boxes.nth(i).uncheck()
    expect(hint).to_be_visible()
    boxes.nth(0).check()
    expect(hint).to_be_hidden()
