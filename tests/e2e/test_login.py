from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer


def test_a_visitor_logs_in_and_sees_the_overview(
    page: Page, live_server: LiveServer, admin_user: tuple[str, str]
) -> None:
    username, password = admin_user
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator(".who")).to_have_text(username)
    # htmx is served locally and loaded (no CDN, no network).
    assert page.evaluate("typeof window.htmx") == "object"


def test_a_wrong_password_keeps_the_visitor_out(
    page: Page, live_server: LiveServer, admin_user: tuple[str, str]
) -> None:
    username, _ = admin_user
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("didn't match")
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))


def test_logging_out_returns_to_the_login_page(
    page: Page, live_server: LiveServer, admin_user: tuple[str, str]
) -> None:
    username, password = admin_user
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))
