"""Feedback where the eye is: a refusal caused by one control is shown beside it, the control
marked and focused. The walkthrough: publishing with the warnings box unticked answered 422 with
the message at the top of a long page while the view stayed at the bottom (scrollY 2001)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer


def test_an_unticked_warnings_box_is_named_beside_it_and_focused(
    signed_in_page: Page, live_server: LiveServer, sample_draft: str
) -> None:
    page = signed_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/policy/publish/")
    box = page.get_by_label(re.compile("I have read the warnings"))
    expect(box).to_be_visible()
    page.get_by_label(re.compile(r"^Message")).fill("without reading the warnings")
    page.get_by_role("button", name="Publish").click()
    refusal = page.locator("#publish-refusal")
    expect(refusal).to_contain_text("warning")
    # Beside the box, in sight, the box focused and marked.
    expect(refusal).to_be_in_viewport()
    expect(box).to_be_focused()
    expect(box).to_have_attribute("aria-invalid", "true")
    assert page.locator("#publish-form #publish-refusal").count() == 1
    box_y = box.bounding_box()
    note_y = refusal.bounding_box()
    assert box_y is not None
    assert note_y is not None
    assert 0 <= note_y["y"] - box_y["y"] < 80  # right below it
