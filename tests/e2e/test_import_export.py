"""Import (preview, then apply) and export of the draft in a real browser (issue 4)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.conftest import SAMPLE_POLICY, LiveServer

TRAITDECK = str(Path(sys.executable).parent / "traitdeck")
REVISION = re.compile(r"^Draft revision (\d+)$")
CLOSE_NEUTRAL = "              close:\n                strategy: [neutral]\n"


def _with_bad_strategy() -> str:
    """The sample with one error: a strategy value the runtime drops (``strategy-value``)."""
    text = SAMPLE_POLICY.read_text()
    assert CLOSE_NEUTRAL in text
    return text.replace(
        CLOSE_NEUTRAL, "              close:\n                strategy: [neutral, sometimes]\n"
    )


def _agents_revision(page: Page, live_server: LiveServer) -> int:
    page.goto(f"{live_server.url}/policy/")
    text = page.locator(".pagehead").get_by_text(REVISION).inner_text()
    match = REVISION.match(text.strip())
    assert match, text
    return int(match[1])


def _open_import(page: Page) -> None:
    page.get_by_role("navigation", name="Main").get_by_role(
        "link", name="Import", exact=True
    ).click()
    expect(page.get_by_role("heading", name="Import a policy")).to_be_visible()


def _traitdeck(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRAITDECK, *args], capture_output=True, check=False)


def test_paste_preview_apply_then_export_matches_fmt(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, tmp_path: Path
) -> None:
    page = signed_in_page
    before = _agents_revision(page, live_server)
    text = _with_bad_strategy()
    pasted = tmp_path / "pasted.yaml"
    pasted.write_text(text)

    _open_import(page)
    page.get_by_label("Paste YAML").fill(text)
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#preview")
    expect(preview.get_by_role("heading", name="Preview")).to_be_visible()
    expect(preview.locator(".summary")).to_contain_text("1 error")
    expect(preview.locator(".summary")).to_contain_text("3 warnings")
    bad = preview.locator('li.diag[data-code="strategy-value"]')
    expect(bad).to_contain_text("'sometimes' is not a strategy value")
    expect(bad).to_contain_text("line 58")  # the line of the text as pasted
    expect(preview.locator("#import-diff .diff-add")).to_contain_text(["sometimes"])

    # Previewing changed nothing.
    other = page.context.new_page()
    assert _agents_revision(other, live_server) == before
    other.close()

    page.get_by_role("button", name="Apply: replace the draft").click()
    expect(page).to_have_url(f"{live_server.url}/policy/")
    expect(page.locator(".messages")).to_contain_text(
        f"Imported: the draft is now at revision {before + 1} with 1 agent."
    )
    row = page.locator('#agents tr[data-agent="main"]')
    expect(row).to_contain_text("1 error")
    expect(row).to_contain_text("3 warnings")

    with page.expect_download() as info:
        page.get_by_role("navigation", name="Main").get_by_role(
            "link", name="Export draft YAML"
        ).click()
    exported = tmp_path / "export.yaml"
    info.value.save_as(exported)
    # The export is the canonical form of what was pasted, and is already canonical itself.
    assert exported.read_bytes() == _traitdeck("fmt", str(pasted)).stdout
    assert exported.read_bytes() == _traitdeck("fmt", str(exported)).stdout
    validate = _traitdeck("validate", str(exported))
    assert validate.returncode == 1
    assert b"1 error, 3 warnings" in validate.stdout


def test_text_that_cannot_be_imported_is_refused_and_changes_nothing(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    before = _agents_revision(page, live_server)
    _open_import(page)
    page.get_by_label("Paste YAML").fill("surfaces: [\n")
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#preview")
    expect(preview.get_by_role("heading", name="This text cannot be imported")).to_be_visible()
    expect(preview.locator('li.diag[data-code="yaml-syntax"]')).to_be_visible()
    expect(preview.get_by_role("button", name="Apply: replace the draft")).to_have_count(0)
    assert _agents_revision(page, live_server) == before


def test_an_upload_applied_after_the_draft_moved_is_refused_with_a_conflict(
    signed_in_page: Page,
    live_server: LiveServer,
    sample_draft: str,
    admin_user: tuple[str, str],
    tmp_path: Path,
) -> None:
    page = signed_in_page
    upload = tmp_path / "policy.yaml"
    upload.write_text(_with_bad_strategy())
    _open_import(page)
    page.get_by_label("or upload a file").set_input_files(upload)
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#preview")
    expect(preview.locator(".summary")).to_contain_text("1 error")

    # Meanwhile the same user adds an agent in another tab.
    other = page.context.new_page()
    before = _agents_revision(other, live_server)
    newcomer = f"moved-{admin_user[0]}"
    other.get_by_label("Add an agent").fill(newcomer)
    other.get_by_role("button", name="Add agent").click()
    expect(other.locator(f'#agents tr[data-agent="{newcomer}"]')).to_be_visible()

    page.get_by_role("button", name="Apply: replace the draft").click()
    problem = page.locator("#problem")
    expect(problem).to_contain_text("Conflict:")
    expect(problem).to_contain_text("The draft changed since you loaded it")
    expect(page.locator(".conflict-note")).to_contain_text(
        "Nothing was applied. The preview below is against the current draft"
        f" (revision {before + 1})"
    )
    # The new preview's diff now shows the newcomer going away.
    expect(page.locator("#import-diff .diff-remove")).to_contain_text([newcomer])

    # Nothing changed: the other tab's agent is still there.
    assert _agents_revision(other, live_server) == before + 1
    expect(other.locator(f'#agents tr[data-agent="{newcomer}"]')).to_be_visible()
    other.close()

    # Applying the fresh preview works.
    page.get_by_role("button", name="Apply: replace the draft").click()
    expect(page.locator(".messages")).to_contain_text(
        f"Imported: the draft is now at revision {before + 2} with 1 agent."
    )
    expect(page.locator(f'#agents tr[data-agent="{newcomer}"]')).to_have_count(0)
