"""A KDCube admin's round trip in a real browser: KDCube's own example descriptor uploaded on the
import page (the preview names the bundle it read), one trait changed in the tool editor, the
descriptor downloaded back — and the diff against the original is that one line."""

from __future__ import annotations

import difflib
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ROOT / "tests/conformance/fixtures/bundles/workspace@2026-03-31-13-36.yaml"
TOOL = "web_tools.web_fetch"


def test_descriptor_in_one_trait_changed_descriptor_out(
    signed_in_page: Page, live_server: LiveServer, tmp_path: Path
) -> None:
    page = signed_in_page
    original = WORKSPACE.read_text(encoding="utf-8")

    page.goto(f"{live_server.url}/policy/import/")
    page.get_by_label("or upload a file").set_input_files(str(WORKSPACE))
    page.get_by_role("button", name="Preview", exact=True).click()
    preview = page.locator("#preview")
    expect(preview.locator(".bundle-chosen")).to_have_text("workspace@2026-03-31-13-36")
    expect(preview.get_by_label("Bundle")).to_have_value("workspace@2026-03-31-13-36")
    expect(preview.locator(".summary")).to_contain_text("0 errors")
    page.get_by_role("button", name="Apply: replace the draft").click()
    expect(page).to_have_url(f"{live_server.url}/policy/")

    page.goto(f"{live_server.url}/policy/agents/main/")
    row = page.locator(f'tr.tool-row[data-tool="{TOOL}"]')
    row.get_by_role("link", name=f"Edit {TOOL}").click()
    expect(page.get_by_role("heading", name=TOOL)).to_be_visible()
    page.get_by_label("exploration", exact=True).uncheck()
    page.get_by_label("neutral", exact=True).check()
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{live_server.url}/policy/agents/main/")

    page.goto(f"{live_server.url}/policy/export/descriptor/")
    page.get_by_label("Your bundles descriptor").set_input_files(str(WORKSPACE))
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the descriptor").click()
    saved = tmp_path / "bundles.yaml"
    download.value.save_as(saved)
    written = saved.read_text(encoding="utf-8")
    changed = [
        line
        for line in difflib.unified_diff(original.splitlines(), written.splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == [
        "-                        strategy: [exploration]",
        "+                        strategy: [neutral]",
    ]
