"""The live page tells why the server refused its stream (too many live pages open)."""

from __future__ import annotations

from django.test import Client

from tests.markup import find, find_all


def test_the_live_page_can_say_the_stream_was_refused_for_too_many_pages(
    viewer_client: Client,
) -> None:
    page = viewer_client.get("/live/").content.decode()
    why = find(page, "div", id="stream-ended", role="alert").attrs["data-4429"]
    assert why.startswith("The live stream was refused: you already have as many live pages")
    assert "(TRAITDECK_MAX_WEBSOCKETS_PER_USER)" in why


def test_the_demo_live_page_says_the_simulator_plays_v3_with_multi_action_on(
    viewer_client: Client, settings: object
) -> None:
    setattr(settings, "DEMO", True)  # noqa: B010 (pytest-django's settings fixture)
    page = viewer_client.get("/live/").content.decode()
    note = find(page, "p", id="demo-runtime-note")
    assert "plays a v3 react agent with multi-action on" in note.text
    assert [strong.text for strong in note.find_all("strong")] == ["v3", "on"]
    setattr(settings, "DEMO", False)  # noqa: B010
    assert not find_all(viewer_client.get("/live/").content.decode(), id="demo-runtime-note")
