"""What a new admin tripped over in a walkthrough, checked where they would notice it."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.conftest import ROUNDS_ARRIVE_MS, SIMULATOR_S, LiveServer

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


def hand_round(turn: str) -> list[dict[str, Any]]:
    """A round with an early start, a failed call carrying its error, an accepted action that
    never ran (multi-action off) and a rejection in the second attempt."""
    start = datetime.now(UTC) - timedelta(seconds=30)
    events: list[dict[str, Any]] = []

    def add(ms: int, type_: str, attempt: int = 0, **fields: Any) -> None:
        events.append(
            {
                "event_id": str(uuid.uuid4()),
                "ts": (start + timedelta(milliseconds=ms)).isoformat(),
                "agent": "main",
                "turn_id": turn,
                "iteration": 0,
                "attempt": attempt,
                "type": type_,
                **fields,
            }
        )

    search = "workspace_jobs.search"
    add(0, "round.started", max_actions=2, multi_action_mode="off")
    add(
        100,
        "action.observed",
        action_index=0,
        action="call_tool",
        tool_id=search,
        params={"query": "the quarterly revenue report for the northern region", "limit": 5},
    )
    add(200, "action.accepted", action_index=0, tool_id=search, strategy=["exploration"])
    add(
        300,
        "action.observed",
        action_index=1,
        action="call_tool",
        tool_id="named_services.provider_about",
        params={"input": "x"},
    )
    add(
        400,
        "action.accepted",
        action_index=1,
        tool_id="named_services.provider_about",
        strategy=["exploration"],
    )
    add(500, "generation.finished")
    add(600, "tool.started", action_index=0, tool_id=search, tool_call_id="tc_fail")
    add(
        900,
        "tool.finished",
        action_index=0,
        tool_id=search,
        tool_call_id="tc_fail",
        status="error",
        duration_ms=300,
        error_code="upstream_unavailable",
    )
    add(
        1000,
        "action.observed",
        1,
        action_index=0,
        action="call_tool",
        tool_id="named_services.object_schema",
        params={"input": "a"},
    )
    add(
        1100,
        "action.accepted",
        1,
        action_index=0,
        tool_id="named_services.object_schema",
        strategy=["exploration"],
    )
    add(
        1200,
        "action.observed",
        1,
        action_index=1,
        action="call_tool",
        tool_id="named_services.upsert_object",
        params={"path": "a.md"},
    )
    add(
        1300,
        "action.rejected",
        1,
        action_index=1,
        tool_id="named_services.upsert_object",
        code="multi_action_bundle_strategy_incompatible",
        extra={"first_tool_id": "named_services.object_schema", "strategy": ["exploitation"]},
    )
    add(1400, "generation.finished", 1)
    add(1500, "round.finished", outcome="failed")
    return events


def test_it_shows_a_round_readably_with_every_code_in_words(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, simulator_token: str
) -> None:
    page = signed_in_page
    turn = post_round(page, live_server, simulator_token)
    page.goto(f"{live_server.url}/live/rounds/main/{turn}/0/")
    table = page.locator("table.round-actions")
    # The table fits the page at 1440: nothing cut off, nothing to scroll sideways.
    wrap = page.locator(".table-wrap").filter(has=table)
    assert wrap.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
    # The failed call's error text, the rule in words with its code, what happened next.
    expect(table).to_contain_text("Error: error_code: upstream_unavailable")
    expect(table).to_contain_text("cannot follow the first action")
    expect(table).to_contain_text("multi_action_bundle_strategy_incompatible")
    expect(table).to_contain_text("Next: the runtime did not run it")
    expect(table).to_contain_text("never run: with multi-action off")
    expect(page.locator("dl.terms")).to_contain_text("matched by slot")
    # Params wrap at words, not every few characters.
    params = table.locator("pre.params").first
    box = params.bounding_box()
    assert box
    assert box["width"] > 150
    # The raw events are folded: one line each until opened.
    expect(page.locator("pre.event-data").first).to_be_hidden()
    assert page.evaluate("document.documentElement.scrollHeight") < 2600


def test_it_holds_new_cards_while_the_focus_is_in_the_list_and_says_paused(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, start_simulator: Any
) -> None:
    page = signed_in_page
    page.goto(f"{live_server.url}/live/")
    status = page.locator("#stream-status")
    expect(status).to_have_text("live")
    cards = page.locator("#rounds article.round-card")
    start_simulator("--rounds", "2", "--rate", "10", "--seed", "41", "--quiet").communicate(
        timeout=SIMULATOR_S
    )
    expect(cards.first).to_be_visible(timeout=ROUNDS_ARRIVE_MS)
    # Tab into the list: the focus ring is plainly visible (not the browser's 1 px).
    link = cards.first.get_by_role("link", name="Timeline")
    link.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    width = link.evaluate("el => parseFloat(getComputedStyle(el).outlineWidth)")
    assert width >= 2
    focused = link.evaluate("el => el.closest('article').id")
    shown = cards.count()
    newest = cards.first.get_attribute("id") or ""
    # The list keeps at most this many cards (the session's earlier tests may have filled it).
    max_cards = int(page.locator("#live").get_attribute("data-max-cards") or "200")
    start_simulator("--rounds", "3", "--rate", "10", "--seed", "42", "--quiet").communicate(
        timeout=SIMULATOR_S
    )
    pending = page.locator("#pending-count")
    expect(pending).to_have_text(
        "3 new rounds held while the focus is in the list", timeout=ROUNDS_ARRIVE_MS
    )
    assert page.evaluate("document.activeElement.closest('article')?.id") == focused
    expect(cards).to_have_count(shown)
    # Focus leaves the list: the held cards go in on top.
    page.locator("#pause").focus()
    expect(cards).to_have_count(min(shown + 3, max_cards), timeout=ROUNDS_ARRIVE_MS)
    expect(cards.first).not_to_have_id(newest)
    expect(pending).to_be_hidden()
    # Paused is said plainly, where "live" was.
    page.locator("#pause").click()
    expect(status).to_have_text("paused")
    page.locator("#pause").click()
    expect(status).to_have_text("live")


def post_round(page: Page, live_server: LiveServer, token: str) -> str:
    turn = f"turn-readable-{uuid.uuid4().hex[:6]}"
    posted = page.request.post(
        f"{live_server.url}/api/v1/events",
        data=json.dumps({"events": hand_round(turn)}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert posted.status == 200, posted.text()
    assert posted.json()["rejected"] == [], posted.text()
    return turn


def test_it_fixes_the_small_things_that_add_up(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, simulator_token: str
) -> None:
    page, url = signed_in_page, live_server.url
    publish_all(page, live_server, "baseline")
    nav = page.get_by_role("navigation", name="Main")

    # One menu item is current; the export link says what it exports.
    for path in ("/policy/", "/policy/versions/", "/policy/publish/", "/live/", "/audit/"):
        page.goto(f"{url}{path}")
        expect(nav.locator("[aria-current=page]")).to_have_count(1)
    expect(nav.get_by_role("link", name="Export draft YAML")).to_be_visible()

    # The audit filter finds "publish" anywhere in the action's name.
    page.goto(f"{url}/audit/?action=publish")
    expect(page.locator("main")).to_contain_text("policy.publish")

    # htmx navigation: the tab title follows; breadcrumbs read "Policy › …" everywhere.
    page.goto(f"{url}/policy/")
    page.locator('tr[data-agent="main"]').get_by_role("link", name="main").click()
    expect(page).to_have_url(f"{url}/policy/agents/main/")
    expect(page).to_have_title(re.compile(r"main.*· Traitdeck"))
    expect(page.locator(".crumbs")).to_have_text(re.compile(r"^\s*Policy › main"))

    # A YAML syntax error shows the text around its line; a hand-edited export is an info.
    page.goto(f"{url}/policy/import/")
    page.get_by_label("Paste YAML").fill("surfaces:\n  as_consumer:\n    agents: [\n  x: 1\n")
    page.get_by_role("button", name="Preview").click()
    excerpt = page.locator("figure.excerpt")
    expect(excerpt).to_contain_text("Your text around line")
    expect(excerpt.locator(".here")).to_have_count(1)
    exported = page.request.get(f"{url}/policy/export.yaml").text()
    page.goto(f"{url}/policy/import/")
    page.get_by_label("Paste YAML").fill(exported + "# edited by hand\nextra_key: 1\n")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator('li.diag.info[data-code="hash-mismatch"]')).to_have_count(1)

    # The playground: fields in words, the mode a select with "other".
    page.goto(f"{url}/policy/agents/main/playground/")
    mode = page.get_by_label("Multi-action mode")
    assert mode.evaluate("el => el.tagName") == "SELECT"
    expect(mode.locator("option", has_text="other")).to_have_count(1)
    expect(page.get_by_label("Most actions accepted per round")).to_be_visible()

    # A connection alias a model cannot type is refused before saving.
    page.goto(f"{url}/policy/agents/main/connections/new/?kind=mcp")
    page.get_by_label("Server id").fill("github")
    page.get_by_label("Alias", exact=True).fill("github tools!")
    page.get_by_role("button", name="Add connection").click()
    expect(page.locator(".field.invalid")).to_contain_text("cannot reliably type")
    page.goto(f"{url}/policy/agents/main/")
    expect(page.locator("main")).not_to_contain_text("github tools!")

    # The overview: last hour's rejections and timeouts, the problem badges link to the agents.
    post_round(page, live_server, simulator_token)
    page.goto(f"{url}/")
    expect(page.locator(".last-hour-problems")).to_contain_text("with a rejection")
    expect(page.locator("a", has=page.locator(".warning-count"))).to_have_attribute(
        "href", "/policy/"
    )
    # The glossary explains the words the pages use.
    page.goto(f"{url}/policy/glossary/")
    for term in ("retry story", "natural_key", "slot", "drift"):
        expect(page.locator("dl.glossary")).to_contain_text(term)
