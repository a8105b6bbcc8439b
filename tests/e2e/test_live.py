"""The live rounds page with a real runtime client: the simulator posts to the real daphne server
over HTTP, the page gets the rounds over its websocket, and nothing is ever reloaded."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.e2e.conftest import ROUNDS_ARRIVE_MS, SIMULATOR_S, LiveServer

#: Seed 3 with the sample policy shows every kind within its first seven rounds (checked with
#: `simulate --seed 3`); twelve rounds leave a margin: 6 with rejections, 3 with early starts,
#: 2 with dedups, 6 with timeouts.
SEED = "3"
ROUNDS = 12
#: A second run while paused: another seed, so its turn ids (and event ids) are new.
PAUSED_SEED = "4"
PAUSED_ROUNDS = 3
#: Rounds are delivered over 1-3 s each; the page must show them soon after (the first ones
#: also wait for the simulator's start-up).
SOON = ROUNDS_ARRIVE_MS

Simulator = Callable[..., subprocess.Popen[str]]


def finished(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=SIMULATOR_S)
    assert process.returncode == 0, f"simulate exited {process.returncode}: {err}"
    return out


def test_simulated_rounds_appear_live_with_every_chip_pause_resume_and_timeline(
    signed_in_page: Page,
    live_server: LiveServer,
    sample_draft: str,
    start_simulator: Simulator,
) -> None:
    page = signed_in_page
    page.goto(f"{live_server.url}/live/")
    expect(page.locator("#stream-status")).to_have_text("live", timeout=SOON)
    rounds = page.locator("#rounds")
    cards = rounds.locator("article.round-card")
    before = cards.count()

    simulator = start_simulator("--rounds", str(ROUNDS), "--rate", "4", "--seed", SEED)
    # The page never reloads: everything below arrives over the websocket.
    expect(cards.first).to_be_visible(timeout=SOON)
    for kind in ("rejected", "early", "dedup", "timeout"):
        expect(rounds.locator(f".chip.{kind}").first).to_be_visible(timeout=SOON)
    out = finished(simulator)
    assert f"posted {ROUNDS} rounds" in out
    expect(cards).to_have_count(before + ROUNDS, timeout=SOON)
    expect(page.locator("#count-rounds")).to_have_text(re.compile(r"^[1-9]\d*$"))
    # Every round finished (its last batch has arrived): no card is still running.
    expect(rounds.locator("article.round-card.outcome-running")).to_have_count(0, timeout=SOON)

    # Pause: the screen keeps still and counts what arrives.
    pause = page.locator("#pause")
    pause.click()
    expect(pause).to_have_text("Resume")
    shown = cards.count()
    finished(start_simulator("--rounds", str(PAUSED_ROUNDS), "--rate", "4", "--seed", PAUSED_SEED))
    pending = page.locator("#pending-count")
    expect(pending).to_be_visible()
    expect(pending).to_have_text(f"{PAUSED_ROUNDS} new rounds held while paused", timeout=SOON)
    expect(page.locator("#stream-status")).to_have_text("paused")
    expect(cards).to_have_count(shown)

    # Resume: the held rounds go in on top.
    pause.click()
    expect(pause).to_have_text("Pause")
    expect(cards).to_have_count(shown + PAUSED_ROUNDS, timeout=SOON)
    expect(pending).to_be_hidden()

    # A round's timeline: the generation lane and one lane per action.
    card = cards.filter(has=page.locator(".chip.timeout")).first
    card.get_by_role("link", name="Timeline").click()
    expect(page).to_have_url(re.compile(r"/live/rounds/main/turn-[0-9a-f]+-\d+/\d+/$"))
    timeline = page.locator("svg.timeline")
    expect(timeline).to_be_visible()
    expect(timeline.locator(".lane-generation").first).to_be_attached()
    expect(timeline.locator(".lane-action").first).to_be_attached()


def test_compact_cards_are_short_show_every_chip_whole_are_remembered_and_expand(
    signed_in_page: Page,
    live_server: LiveServer,
    sample_draft: str,
    start_simulator: Simulator,
) -> None:
    """The walkthrough: the live page was 24,381 px tall at 200 cards."""
    page = signed_in_page
    page.set_viewport_size({"width": 1280, "height": 900})
    finished(start_simulator("--rounds", "12", "--rate", "20", "--seed", "5", "--quiet"))
    page.goto(f"{live_server.url}/live/")
    cards = page.locator("#rounds .round-card")
    expect(cards.first).to_be_visible()
    full = page.evaluate("document.getElementById('rounds').scrollHeight")
    count = cards.count()
    heights_js = """() => Object.fromEntries([...document.querySelectorAll('#rounds .round-card')]
        .map(card => [card.id, card.getBoundingClientRect().height]))"""
    full_heights = page.evaluate(heights_js)

    compact = page.get_by_role("button", name="Compact")
    compact.click()
    expect(compact).to_have_attribute("aria-pressed", "true")
    heights = page.evaluate(heights_js)
    # A line each, more where a round's actions need them (they wrap, never cut): the cards
    # shown depend on what earlier tests of the session posted, so each compact card is held to
    # its own full height (and the page, below, to less than half of its full height).
    grew = {key: (full_heights[key], h) for key, h in heights.items() if h >= full_heights[key]}
    assert grew == {}, grew
    # Every chip whole: none runs past its card's edge (at 1280 px the walkthrough read "reje",
    # "acce" at the right edge).
    cut = page.evaluate(
        """() => [...document.querySelectorAll('#rounds .round-card .chip')].filter(chip => {
            const card = chip.closest('.round-card').getBoundingClientRect();
            const box = chip.getBoundingClientRect();
            return box.width > 0 && (box.right > card.right - 1 || box.bottom > card.bottom);
        }).map(chip => chip.closest('.round-card').id + ': ' + chip.textContent)"""
    )
    assert cut == []
    assert page.evaluate("document.getElementById('rounds').scrollHeight") < full / 2
    first = cards.first
    expect(first.locator(".chip").first).to_be_visible()
    for params in first.locator(".params").all():
        expect(params).to_be_hidden()  # chips only

    # Remembered by the page: a reload stays compact.
    page.reload()
    expect(page.get_by_role("button", name="Compact")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#rounds")).to_have_class(re.compile(r"\bcompact\b"))
    assert cards.count() == count

    # A click on a round expands it (its toggle says so); another folds it back.
    card = cards.first
    card.locator(".round-head .turn").click()
    expect(card).to_have_class(re.compile(r"\bexpanded\b"))
    expect(card.locator(".card-toggle")).to_have_attribute("aria-expanded", "true")
    box = card.bounding_box()
    assert box is not None
    assert box["height"] > 40
    card.locator(".card-toggle").click()
    expect(card).not_to_have_class(re.compile(r"\bexpanded\b"))

    # Back to full cards, remembered too.
    page.get_by_role("button", name="Compact").click()
    page.reload()
    expect(page.get_by_role("button", name="Compact")).to_have_attribute("aria-pressed", "false")
