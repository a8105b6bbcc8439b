"""Governance in a real browser: an editor changes a trait, a publisher reviews the diff,
publishes, rolls back, and the audit log shows all three — each person in their own session,
with roles given by the real ``user_role`` command."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import LiveServer, log_in

TOOL = "workspace_jobs.check_job_status"


def _user(live_server: LiveServer, role: str) -> tuple[str, str]:
    username, password = f"{role}{time.monotonic_ns()}", "browser-pw-123"
    code = (
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_user({username!r}, password={password!r})"
    )
    live_server.manage("shell", "-c", code)
    live_server.manage("user_role", username, role)
    return username, password


def _session(browser: Browser, live_server: LiveServer, user: tuple[str, str]) -> Page:
    page = browser.new_context().new_page()
    log_in(page, live_server, user)
    return page


def _publish(page: Page, live_server: LiveServer, message: str) -> int:
    page.goto(f"{live_server.url}/policy/publish/")
    expect(page.get_by_role("heading", name="Publish the draft")).to_be_visible()
    box = page.get_by_label(re.compile("I have read the warnings"))
    if box.count():
        box.check()
    page.get_by_label(re.compile(r"^Message")).fill(message)
    page.get_by_role("button", name="Publish").click()
    expect(page).to_have_url(re.compile(r"/policy/versions/\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def test_edit_review_publish_roll_back_and_audit(
    browser: Browser, live_server: LiveServer, sample_draft: str
) -> None:
    editor = _session(browser, live_server, _user(live_server, "editor"))
    publisher = _session(browser, live_server, _user(live_server, "publisher"))

    # A baseline in force (the shared server may hold versions of other tests already).
    publisher.goto(f"{live_server.url}/policy/publish/")
    if not publisher.locator(".no-changes").count():
        _publish(publisher, live_server, "baseline")
    baseline = publisher.goto(f"{live_server.url}/api/v1/versions").json()["in_force"]

    # The editor changes a trait; the editor cannot publish.
    editor.goto(f"{live_server.url}/policy/agents/main/")
    editor.locator(f'tr.tool-row[data-tool="{TOOL}"]').get_by_role(
        "link", name=f"Edit {TOOL}"
    ).click()
    editor.get_by_label("exploration", exact=True).uncheck()
    editor.get_by_label("neutral", exact=True).check()
    editor.get_by_role("button", name="Save").click()
    expect(editor).to_have_url(f"{live_server.url}/policy/agents/main/")
    editor.goto(f"{live_server.url}/policy/publish/")
    expect(editor.get_by_text("Forbidden").or_(editor.get_by_text("not allowed"))).to_be_visible()

    # The publisher sees the change in words and in the diff, then publishes it.
    publisher.goto(f"{live_server.url}/policy/publish/")
    changes = publisher.locator(".tool-changes")
    expect(changes).to_contain_text(f"main · {TOOL}: strategy exploration → neutral")
    expect(publisher.locator(".diff .diff-add").filter(has_text="neutral")).not_to_have_count(0)
    published = _publish(publisher, live_server, "check_job_status is bookkeeping")
    assert published == baseline + 1
    expect(publisher.locator(".version-message")).to_have_text("check_job_status is bookkeeping")
    expect(publisher.get_by_role("heading", level=1)).to_have_text(f"Version {published} in force")

    # Roll back to the baseline: a new version, a copy of it, and the draft follows.
    publisher.goto(f"{live_server.url}/policy/versions/{baseline}/")
    publisher.get_by_role("link", name=f"Review a rollback to version {baseline}").click()
    # The review: from the version in force to this one, in words, before anything changes.
    expect(publisher.locator(".tool-changes")).to_contain_text(
        f"main · {TOOL}: strategy neutral → exploration"
    )
    publisher.get_by_label(re.compile(r"^Why")).fill("exploration after all")
    publisher.get_by_label("I reviewed the changes above").check()
    publisher.get_by_role("button", name=f"Roll back to version {baseline}").click()
    expect(publisher).to_have_url(f"{live_server.url}/policy/versions/{published + 1}/")
    expect(publisher.locator(".facts")).to_contain_text(f"version {baseline} (a rollback)")
    publisher.goto(f"{live_server.url}/policy/agents/main/")
    row = publisher.locator(f'tr.tool-row[data-tool="{TOOL}"]')
    expect(row.locator(".chip.strategy-exploration")).to_have_text("exploration")

    # The audit log shows the edit, the publish and the rollback, newest first.
    publisher.goto(f"{live_server.url}/audit/")
    log = publisher.locator("main")
    expect(log).to_contain_text("policy.rollback")
    expect(log).to_contain_text("policy.publish")
    expect(log).to_contain_text("tool.edit")
    text = log.inner_text()
    assert text.index("policy.rollback") < text.index("policy.publish") < text.index("tool.edit")
    editor.context.close()
    publisher.context.close()
