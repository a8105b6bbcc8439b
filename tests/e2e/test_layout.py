"""Every page at 1440 and 800 px: nothing wider than the window, and a screenshot of each.

The pages are filled the way a real instance is: the sample policy, rounds posted by the simulator
over HTTP, a published version and a runtime token. Screenshots go to
``.test-artifacts/screenshots/<page>-<width>.png``.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import ROOT, SIMULATOR_S, LiveServer

SHOTS = ROOT / ".test-artifacts" / "screenshots"
WIDTHS = (1440, 800)
TOOL_EDIT = "/policy/agents/main/connections/0/tools/{key}/"

Simulator = Callable[..., subprocess.Popen[str]]


def _overflow(page: Page) -> dict[str, object]:
    """The document's width against the window's, and the widest elements that stick out."""
    return page.evaluate(
        """() => {
          const vw = document.documentElement.clientWidth;
          const out = [];
          for (const el of document.querySelectorAll('body *')) {
            const r = el.getBoundingClientRect();
            if (r.right > vw + 1 && r.width > 0) {
              let scroller = el.parentElement, hidden = false;
              while (scroller && scroller !== document.body) {
                const s = getComputedStyle(scroller);
                if (s.overflowX !== 'visible') { hidden = true; break; }
                scroller = scroller.parentElement;
              }
              const name = el.tagName.toLowerCase() + '.' + el.className;
              if (!hidden) out.push(name + ' → ' + Math.round(r.right));
            }
          }
          const scroll = document.documentElement.scrollWidth;
          return {scroll: scroll, viewport: vw, culprits: out.slice(0, 8)};
        }"""
    )


def _check(page: Page, name: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_load_state("load")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    found = _overflow(page)
    assert found["scroll"] <= found["viewport"], f"{name} at {width}px overflows: {found}"


def _pages(page: Page, live_server: LiveServer) -> dict[str, str]:
    """Every page a signed-in admin can open, with real content in each."""
    url = live_server.url
    page.goto(f"{url}/live/history/")
    round_href = page.locator("table.history a[href*='/live/rounds/']").first.get_attribute("href")
    page.goto(f"{url}/policy/agents/main/")
    tool_href = page.locator("tr.tool-row a[href*='/tools/']").first.get_attribute("href")
    versions = page.request.get(f"{url}/api/v1/versions").json()
    number = versions["in_force"]
    return {
        "overview": "/",
        "policy": "/policy/",
        "agent": "/policy/agents/main/",
        "manifest": "/policy/agents/main/manifest/",
        "effective": "/policy/agents/main/effective/",
        "catalog": "/policy/agents/main/catalog/",
        "playground": "/policy/agents/main/playground/",
        "tool-editor": tool_href or "",
        "connection-editor": "/policy/agents/main/connections/0/edit/",
        "import": "/policy/import/",
        "publish": "/policy/publish/",
        "versions": "/policy/versions/",
        "version": f"/policy/versions/{number}/",
        "diff": f"/policy/diff/?from={number}&to=draft",
        "impact": f"/policy/impact/?baseline={number}&candidate=draft",
        "live": "/live/",
        "history": "/live/history/",
        "round": round_href or "",
        "audit": "/audit/",
        "tokens": "/tokens/",
        "not-found": "/policy/agents/no-such-agent/",
    }


#: Seeds no other browser test posts (the server is shared: a seed posts the same event ids).
#: With the sample policy, seed 22 rejects in its first two rounds, seed 12 in its last two.
LAYOUT_SEED = "22"
#: One manifest entry the config overrides, one it leaves in effect, one for no tool of the policy.
LAYOUT_MANIFEST = {
    "workspace_jobs.search": {"tool_traits": {"strategy": ["neutral"]}},
    "workspace_jobs.check_job_status": {
        "tool_traits": {
            "execution": {
                "trigger": "tool_call_complete",
                "concurrency": "parallel_with_generation",
                "result_dependency": "detached",
                "replay": "at_most_once_per_round",
            }
        }
    },
    "workspace_jobs.retired_export": {"tool_traits": {"strategy": ["exploitation"]}},
}
TIMELINE_SEED = "12"


def _simulate(start_simulator: Simulator, seed: str) -> None:
    process = start_simulator("--rounds", "4", "--rate", "10", "--seed", seed, "--quiet")
    _, err = process.communicate(timeout=SIMULATOR_S)
    assert process.returncode == 0, err


@pytest.fixture
def filled(
    live_server: LiveServer, sample_draft: str, signed_in_page: Page, start_simulator: Simulator
) -> Page:
    """Rounds from the simulator, a published version and a runtime token."""
    page = signed_in_page
    _simulate(start_simulator, LAYOUT_SEED)
    live_server.manage(
        "runtime_token",
        "create",
        "layout-viewer",
        "--scope",
        "config:read",
        "--rotate",
        check=False,
    )
    page.goto(f"{live_server.url}/policy/publish/")
    if not page.locator(".no-changes").count():
        box = page.get_by_label(re.compile("I have read the warnings"))
        if box.count():
            box.check()
        page.get_by_label(re.compile(r"^Message")).fill("layout baseline")
        page.get_by_role("button", name="Publish").click()
        expect(page).to_have_url(re.compile(r"/policy/versions/\d+/$"))
    return page


def _visit_every_page(
    page: Page,
    pages: dict[str, str],
    live_server: LiveServer,
    missing: list[str],
    failures: list[str],
) -> None:
    for name, path in pages.items():
        assert path, f"no link found for {name}"
        missing.clear()
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        # No page asks for anything that is not there (the favicon included).
        expected = [f"{live_server.url}{path}"] if name == "not-found" else []
        if missing != expected:
            failures.append(f"{name}: 404 for {missing}")
        for width in WIDTHS:
            try:
                _check(page, name, width)
            except AssertionError as problem:
                failures.append(str(problem))


def test_no_page_is_wider_than_the_window_at_1440_and_800(
    filled: Page, live_server: LiveServer, browser: Browser
) -> None:
    page = filled
    pages = _pages(page, live_server)
    failures: list[str] = []
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": csrf, "Referer": f"{live_server.url}/"}
    # A manifest with one entry of each kind, so the manifest page shows its marks.
    manifest = page.request.put(
        f"{live_server.url}/api/v1/agents/main/manifest",
        data=json.dumps(LAYOUT_MANIFEST),
        headers={**headers, "Content-Type": "application/json"},
    )
    assert manifest.ok, manifest.text()
    page.goto(f"{live_server.url}/policy/agents/main/manifest/")
    for status in ("overridden by config", "used", "unused"):
        expect(page.locator(".entry-status", has_text=re.compile(f"^{status}"))).to_have_count(1)
    try:
        _visit_every_page(page, pages, live_server, missing, failures)
    finally:
        page.request.delete(f"{live_server.url}/api/v1/agents/main/manifest", headers=headers)
    # The login page, as someone not yet signed in sees it.
    anonymous = browser.new_context().new_page()
    anonymous.goto(f"{live_server.url}/accounts/login/")
    for width in WIDTHS:
        try:
            _check(anonymous, "login", width)
        except AssertionError as problem:
            failures.append(str(problem))
    anonymous.context.close()
    assert not failures, "\n".join(failures)


def test_skip_link_dark_theme_and_our_not_found_page(
    signed_in_page: Page, live_server: LiveServer
) -> None:
    page = signed_in_page
    page.goto(f"{live_server.url}/policy/")
    # The first Tab reaches the skip link; following it puts the focus on the page's content.
    page.keyboard.press("Tab")
    skip = page.locator(":focus")
    expect(skip).to_have_text("Skip to content")
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()

    # The reader's dark setting gives a dark page.
    page.emulate_media(color_scheme="dark")
    page.reload()
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    channels = [int(n) for n in re.findall(r"\d+", background)[:3]]
    assert max(channels) < 60, background
    for name, path in (("policy", "/policy/"), ("agent", "/policy/agents/main/")):
        page.goto(f"{live_server.url}{path}")
        _check(page, f"{name}-dark", 1440)
    page.emulate_media(color_scheme="light")

    # An unknown address: our page, inside the site's frame, with a way back.
    response = page.goto(f"{live_server.url}/no/such/page/")
    assert response is not None
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("link", name="Back to the overview")).to_be_visible()


def test_timeline_marks_are_shapes_reachable_by_keyboard_and_readable_at_800(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str, start_simulator: Simulator
) -> None:
    page = signed_in_page
    _simulate(start_simulator, TIMELINE_SEED)
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(f"{live_server.url}/live/history/")
    page.locator("tr.history-row", has=page.locator(".chip.rejected")).first.locator(
        "a[href*='/live/rounds/']"
    ).click()
    chart = page.locator("svg.timeline")
    expect(chart).to_be_visible()

    # A rejection is a cross, a timeout a triangle, a dedup a square, acceptance a circle.
    rejected = chart.locator("g.mark-rejected").first
    expect(rejected.locator("path.shape")).to_have_attribute("d", "M-6,-6 L6,6 M6,-6 L-6,6")
    expect(chart.locator("g.mark-accepted circle.shape").first).to_be_attached()

    # The legend names every kind, the dashed unfinished box and the generation-finished line.
    legend = page.get_by_role("list", name="Legend")
    for words in (
        "generation (the model streaming)",
        "generation without generation.finished",
        "generation finished",
        "early execution",
        "execution after generation",
        "accepted (circle)",
        "rejected (cross)",
        "timeout (triangle)",
        "ledger dedup (square)",
    ):
        expect(legend).to_contain_text(words)

    # Full lane labels: nothing cut with an ellipsis; text at least 10 px on screen at 800 px.
    labels = chart.locator("text.lane-label")
    for text in labels.all_text_contents():
        assert "…" not in text
    height = labels.first.locator("tspan").first.evaluate("el => el.getBoundingClientRect().height")
    assert height >= 10, height

    # Tab reaches the marks; the focused mark's details show under the chart, as on hover.
    detail = page.locator("#timeline-detail")
    rejected.focus()
    expect(rejected).to_be_focused()
    label = rejected.get_attribute("aria-label") or ""
    assert "rejected:" in label
    expect(detail).to_have_text(label)
    page.keyboard.press("Shift+Tab")
    focused = page.locator(":focus")
    expect(focused).to_have_class(re.compile(r"\bmark\b"))
    expect(detail).to_have_text(focused.get_attribute("aria-label") or "")
    _check(page, "round-timeline-focus", 800)

    # Zoom to a time range: the axis starts there; "Whole round" goes back.
    page.get_by_label("From (s)").fill("1")
    page.get_by_label("to (s)").fill("2")
    page.get_by_role("button", name="Zoom").click()
    expect(chart.locator(".axis .tick text").first).to_have_text("1 s")
    expect(page.get_by_role("link", name=re.compile(r"^Whole round"))).to_be_visible()
    _check(page, "round-timeline-zoomed", 800)
