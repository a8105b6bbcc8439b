"""The live page tells why the server refused its stream (too many live pages open)."""

from __future__ import annotations

from django.test import Client


def test_the_live_page_can_say_the_stream_was_refused_for_too_many_pages(
    viewer_client: Client,
) -> None:
    page = viewer_client.get("/live/").content.decode()
    assert 'data-4429="The live stream was refused: you already have as many live pages' in page
    assert "(TRAITDECK_MAX_WEBSOCKETS_PER_USER)" in page


def test_the_demo_live_page_says_the_simulator_plays_v3_with_multi_action_on(
    viewer_client: Client, settings: object
) -> None:
    setattr(settings, "DEMO", True)  # noqa: B010 (pytest-django's settings fixture)
    page = viewer_client.get("/live/").content.decode()
    assert 'id="demo-runtime-note"' in page
    assert "plays a <strong>v3</strong> react agent with multi-action <strong>on</strong>" in page
    setattr(settings, "DEMO", False)  # noqa: B010
    assert 'id="demo-runtime-note"' not in viewer_client.get("/live/").content.decode()
