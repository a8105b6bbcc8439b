"""What the third walkthrough measured by eye: light chips at 4.36–4.41:1 (12 px text needs
4.5:1), the dark top bar's focus ring at 2.8:1 (a ring needs 3:1), the tool table's Advice column
off-screen and the tool editor's Check panel below Save at 800 px, and an underlined space
between the overview's "0 errors" and "3 warnings"."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer

#: WCAG contrast of an element's text (or outline) against the first opaque background behind it.
CONTRAST = """(el, prop) => {
  const parse = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = ([r, g, b]) => 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  let node = prop === 'outline' ? el.parentElement : el, bg = null;
  while (node) {
    const c = parse(getComputedStyle(node).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.99)) { bg = c; break; }
    node = node.parentElement;
  }
  bg = bg || [255, 255, 255];
  const style = getComputedStyle(el);
  const fg = parse(prop === 'outline' ? style.outlineColor : style.color);
  const [a, b] = [lum(fg), lum(bg)];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""

#: Every chip look the pages use, on a scratch element (a page need not show each at once).
CHIP_CLASSES = (
    "",
    "ok",
    "warn",
    "bad",
    "info",
    "early",
    "layer-config",
    "layer-manifest",
    "layer-builtin",
    "kind",
    "strategy-exploration",
    "strategy-exploitation",
    "strategy-neutral",
    "accepted",
    "rejected",
    "drift",
    "dedup",
    "timeout",
    "error",
    "pending",
    "outcome ok",
    "outcome retried",
    "outcome failed",
    "outcome tone-warn",
    "not-in-policy",
)


def test_light_chips_read_at_4_5_to_1_and_the_top_bars_focus_ring_at_3_to_1(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.emulate_media(color_scheme="light")
    page.goto(f"{live_server.url}/policy/agents/main/")
    low = []
    for name in CHIP_CLASSES:
        ratio = page.evaluate(
            f"""(name) => {{
              const chip = document.createElement('span');
              chip.className = ('chip ' + name).trim();
              chip.textContent = 'chip';
              document.querySelector('main').appendChild(chip);
              const ratio = ({CONTRAST})(chip, 'color');
              chip.remove();
              return ratio;
            }}""",
            name,
        )
        if ratio < 4.5:
            low.append(f"chip {name or '(plain)'}: {ratio:.2f}:1")
    assert low == []

    # The keyboard's ring on the dark top bar.
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(f"{live_server.url}/policy/")
        link = page.locator(".topbar a").first
        link.focus()
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Tab")
        focused = page.locator(".topbar :focus-visible")
        expect(focused).to_have_count(1)
        ratio = focused.evaluate(CONTRAST, "outline")
        assert ratio >= 3.0, f"{scheme}: the top bar's focus ring is {ratio:.2f}:1"


def test_the_overview_underlines_no_space_between_its_chips(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.emulate_media(color_scheme="light")
    page.goto(f"{live_server.url}/")
    link = page.locator("a:has(.error-count)")
    expect(link).to_contain_text("warning")
    # A space inside an underlined link draws a line between the chips.
    underlined = link.evaluate(
        """(a) => {
          const style = getComputedStyle(a);
          const spaces = [...a.childNodes].some(
            (n) => n.nodeType === 3 && n.textContent.length && !n.textContent.trim());
          return style.textDecorationLine.includes('underline')
            && spaces && !style.display.includes('flex');
        }"""
    )
    assert underlined is False


def test_at_800_px_advice_and_the_check_panel_are_in_sight(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(f"{live_server.url}/live/tools/?agent=main")
    header = page.locator("#tools-table thead th", has_text="Advice")
    expect(header).to_be_in_viewport()
    box = header.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= 800

    page.goto(f"{live_server.url}/policy/agents/main/connections/0/tools/search/")
    check = page.get_by_role("heading", name="Check")
    save = page.get_by_role("button", name="Save")
    expect(check).to_be_visible()
    check_box, save_box = check.bounding_box(), save.bounding_box()
    assert check_box is not None
    assert save_box is not None
    # Beside the form, not below its Save button.
    assert check_box["y"] < save_box["y"]
    assert check_box["x"] > save_box["x"]
