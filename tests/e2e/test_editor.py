"""The policy editor in a real browser (issue 4): edit a tool's traits with live diagnostics,
then check the catalog preview, the playground and the export against the ``traitdeck`` CLI.

Every assertion is about something the user sees; the CLI runs on the file the browser
downloaded, as a user would run it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Page, expect

from core.text import counted
from tests.e2e.conftest import LiveServer

TRAITDECK = str(Path(sys.executable).parent / "traitdeck")
TOOL = "mcp.browser.open_page"
EARLY_LINE = (
    "• execution: trigger=tool_call_complete, concurrency=parallel_with_generation, "
    "result_dependency=detached, replay=at_most_once_per_round"
)
REVISION = re.compile(r"^Draft revision (\d+)$")


def _revision(page: Page) -> int:
    """The draft revision the agent (or agents) page shows."""
    text = page.locator(".pagehead").get_by_text(REVISION).inner_text()
    match = REVISION.match(text.strip())
    assert match, text
    return int(match[1])


def _traitdeck(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRAITDECK, *args], capture_output=True, check=False)


def _open_agent(page: Page, live_server: LiveServer, agent: str = "main") -> None:
    page.goto(f"{live_server.url}/policy/")
    page.locator("#agents").get_by_role("link", name=agent, exact=True).click()
    expect(page.get_by_role("heading", name=f"Agent {agent}")).to_be_visible()


def test_edit_an_mcp_tool_then_catalog_playground_and_export(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, tmp_path: Path
) -> None:
    page = signed_in_page
    _open_agent(page, live_server)
    row = page.locator(f'tr.tool-row[data-tool="{TOOL}"]')
    expect(row).to_contain_text("exploration")
    expect(row.get_by_text("starts early")).to_have_count(0)
    before = _revision(page)

    # Open the tool's editor from its row.
    row.get_by_role("link", name=f"Edit {TOOL}").click()
    expect(page.get_by_role("heading", name=TOOL)).to_be_visible()
    check = page.locator("#tool-diagnostics")
    expect(check.get_by_text("No problems found.")).to_be_visible()

    # Exploration plus early start: the live check warns at once, before anything is saved.
    expect(page.get_by_label("Start while the model is still generating")).not_to_be_checked()
    page.get_by_label("exploration", exact=True).check()
    page.get_by_label("Start while the model is still generating").check()
    inert = check.locator('li.diag[data-code="execution-inert"]')
    expect(inert).to_be_visible()
    expect(inert).to_contain_text("execution-inert")
    expect(inert).to_contain_text("never starts early")
    expect(inert).to_contain_text("Fix: Set strategy: [neutral]")
    expect(check).to_contain_text("runs after generation")

    # Nothing was saved: another tab on the agent page still shows the old draft.
    other = page.context.new_page()
    _open_agent(other, live_server)
    assert _revision(other) == before
    other_row = other.locator(f'tr.tool-row[data-tool="{TOOL}"]')
    expect(other_row).to_contain_text("exploration")
    expect(other_row.get_by_text("starts early")).to_have_count(0)
    other.close()

    # Neutral only: the warning goes, and the check says the tool starts early.
    page.get_by_label("exploration", exact=True).uncheck()
    page.get_by_label("neutral", exact=True).check()
    expect(inert).to_have_count(0)
    expect(check.get_by_text("No problems found.")).to_be_visible()
    expect(check.locator(".chip.early")).to_have_text("starts early")

    # Save: back on the agent page, one revision later, the row has the badge.
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{live_server.url}/policy/agents/main/")
    expect(page.get_by_role("heading", name="Agent main")).to_be_visible()
    expect(page.locator(".pagehead")).to_contain_text(f"Draft revision {before + 1}")
    row = page.locator(f'tr.tool-row[data-tool="{TOOL}"]')
    expect(row.locator(".chip.early")).to_have_text("starts early")
    expect(row.locator(".chip.strategy-neutral")).to_have_text("neutral")
    expect(row.locator(".chip.strategy-exploration")).to_have_count(0)
    expect(page.locator(f'tr.tool-row[data-tool="{TOOL}"] + tr.diag-row')).to_have_count(0)

    # Catalog preview: the Scope the model reads.
    page.get_by_role("navigation", name="Views of this agent").get_by_role(
        "link", name="Catalog preview"
    ).click()
    expect(page.get_by_role("heading", name="Catalog preview of main")).to_be_visible()
    catalog = page.locator("#catalog").text_content() or ""
    block = re.search(
        rf"^\[\d+\] {re.escape(TOOL)}\n   Scope:\n(?P<scope>(?:       .*\n?)+)", catalog, re.M
    )
    assert block, catalog
    assert block["scope"].splitlines() == [
        "       • strategy: neutral",
        f"       {EARLY_LINE}",
    ]

    # Playground: a round with that tool (params {}) starts it early; a provider retry dedups.
    page.get_by_role("link", name="Playground").click()
    expect(page.get_by_role("heading", name="Playground for main")).to_be_visible()
    first_attempt = page.get_by_role("group", name=re.compile(r"^Attempt 1"))
    first_attempt.get_by_label("Action", exact=True).select_option(TOOL)
    first_attempt.get_by_label(re.compile(r"^params")).fill("{}")
    page.get_by_role("button", name="Run the round").click()
    verdict = page.locator('#results tr.verdict[data-attempt="0"][data-index="0"]')
    expect(verdict).to_contain_text(TOOL)
    expect(verdict.locator("td.online")).to_have_text("accepted")
    expect(verdict.locator("td.final")).to_have_text("accepted")
    expect(verdict.locator(".chip.early")).to_have_text("starts early")
    # The default mode is off: the page says the ordering rules only matter if the model
    # streams several actions anyway.
    expect(page.locator("#multi-off-note")).to_contain_text("Multi-action is off")
    expect(verdict.locator(".ledger")).to_contain_text("started")
    call_id = verdict.locator(".tool-call-id")
    expect(call_id).to_have_text(re.compile(r"^tc_\w+$"))
    first_id = call_id.inner_text()

    page.get_by_role("button", name="Add a second attempt (a provider retry)").click()
    expect(page.locator("#attempt-1")).to_be_visible()
    page.get_by_role("button", name="Run the round").click()
    retry = page.locator('#results tr.verdict[data-attempt="1"][data-index="0"]')
    expect(retry.locator(".ledger")).to_contain_text("dedup")
    expect(retry.locator(".tool-call-id")).to_have_text(first_id)
    page.get_by_text("Raw JSON").click()
    result_json = page.locator("#result-json").inner_text()
    page.get_by_text("This round as R.json").click()
    round_json = page.locator("#round-json").inner_text()

    # Export from the main navigation: a download byte-identical to `traitdeck fmt` of itself.
    page.goto(f"{live_server.url}/")
    with page.expect_download() as info:
        page.get_by_role("navigation", name="Main").get_by_role(
            "link", name="Export draft YAML"
        ).click()
    download = info.value
    assert download.suggested_filename == "traitdeck-policy.yaml"
    exported = tmp_path / download.suggested_filename
    download.save_as(exported)
    body = exported.read_bytes()
    assert b"open_page:\n" in body

    fmt = _traitdeck("fmt", str(exported))
    assert fmt.returncode == 0, fmt.stderr
    assert fmt.stdout == body

    # `traitdeck validate` agrees with the counts the overview shows.
    errors = int(page.locator(".policy-overview .error-count").inner_text().split()[0])
    warnings = int(page.locator(".policy-overview .warning-count").inner_text().split()[0])
    validate = _traitdeck("validate", str(exported))
    assert validate.returncode == (1 if errors else 0), validate.stdout
    assert f"{counted(errors, 'error')}, {counted(warnings, 'warning')}".encode() in validate.stdout

    # The CLI reads the same catalog and runs the same round as the pages did.
    cli_catalog = _traitdeck("catalog", str(exported), "--agent", "main")
    assert cli_catalog.stdout.decode() == catalog
    round_file = tmp_path / "R.json"
    round_file.write_text(round_json)
    dry = _traitdeck(
        "dry-run", str(exported), "--agent", "main", "--round", str(round_file), "--format", "json"
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) == json.loads(result_json)


def test_a_stale_edit_gets_a_conflict_and_changes_nothing(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, admin_user: tuple[str, str]
) -> None:
    page = signed_in_page
    tool = "mcp.browser.close"
    _open_agent(page, live_server)
    row = page.locator(f'tr.tool-row[data-tool="{tool}"]')
    expect(row).to_contain_text("2 s")
    row.get_by_role("link", name=f"Edit {tool}").click()
    expect(page.get_by_role("heading", name=tool)).to_be_visible()
    edit_url = page.url

    # The same user changes the draft in another tab: a new agent.
    other = page.context.new_page()
    other.goto(f"{live_server.url}/policy/")
    before = _revision(other)
    newcomer = f"stale-{admin_user[0]}"
    other.get_by_label("Add an agent").fill(newcomer)
    other.get_by_role("button", name="Add agent").click()
    expect(other.locator(f'#agents tr[data-agent="{newcomer}"]')).to_be_visible()
    expect(other.locator(".pagehead")).to_contain_text(f"Draft revision {before + 1}")

    # The first tab, still on the old revision, saves a new timeout: refused with a 409 and
    # the conflict view: the tool as the draft has it now beside the unsaved input.
    page.get_by_label("Timeout (s)").fill("7")
    with page.expect_response(lambda r: r.request.method == "POST" and r.url == edit_url) as answer:
        page.get_by_role("button", name="Save").click()
    assert answer.value.status == 409
    conflict = page.locator("#conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_contain_text("Conflict:")
    expect(conflict).to_contain_text("Nothing was saved")
    expect(conflict.locator(".conflict-current")).to_contain_text("timeout_s: 2")
    expect(conflict.locator(".conflict-yours")).to_contain_text("timeout_s: 7")
    expect(conflict.get_by_role("link", name="reload")).to_be_visible()
    # The form stays as typed, on the same page.
    assert page.url == edit_url
    expect(page.get_by_label("Timeout (s)")).to_have_value("7")

    # Nothing changed: the agent page shows the other tab's revision and the old timeout.
    other.goto(f"{live_server.url}/policy/agents/main/")
    assert _revision(other) == before + 1
    expect(other.locator(f'tr.tool-row[data-tool="{tool}"]')).to_contain_text("2 s")
    other.close()

    # The form is now based on the current revision: saving again applies the input.
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="Agent main")).to_be_visible()
    expect(page.locator(".pagehead")).to_contain_text(f"Draft revision {before + 2}")
    expect(page.locator(f'tr.tool-row[data-tool="{tool}"]')).to_contain_text("7 s")
