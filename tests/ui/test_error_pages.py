"""Traitdeck's own 404 and 500 pages, with DEBUG on (the demo) as with it off (issue 12)."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.conftest import make_user
from tests.markup import page_text, text_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(client: Client) -> Client:
    make_user("vera", "viewer", password="pw-vera-123")
    client.login(username="vera", password="pw-vera-123")
    return client


@pytest.mark.parametrize("debug", [True, False])
def test_an_unknown_url_gets_our_not_found_page(viewer: Client, debug: bool) -> None:
    with override_settings(DEBUG=debug):
        response = viewer.get("/no/such/page/")
    assert response.status_code == 404
    text = response.content.decode()
    assert text_of(text, "h1") == "Not found"
    assert "Back to the overview" in page_text(text)
    # raw: no trace of Django's debug page anywhere in the answer (comments and scripts too).
    assert "DEBUG = True" not in text
    assert "URLconf" not in text  # raw: (as above)


@pytest.mark.parametrize("debug", [True, False])
def test_a_missing_agent_gets_our_not_found_page_with_the_reason(
    viewer: Client, debug: bool
) -> None:
    with override_settings(DEBUG=debug):
        response = viewer.get("/policy/agents/nobody-here/effective/")
    assert response.status_code == 404
    text = response.content.decode()
    assert text_of(text, "h1") == "Not found"
    assert "nobody-here" in page_text(text)
    assert "Traceback" not in text  # raw: nowhere in the answer, comments and scripts too


@pytest.mark.parametrize("debug", [True, False])
@override_settings(ROOT_URLCONF="tests.ui.boom_urls")
def test_a_failing_page_gets_our_server_error_page(debug: bool) -> None:
    client = Client(raise_request_exception=False)
    make_user("vera", "viewer", password="pw-vera-123")
    client.login(username="vera", password="pw-vera-123")
    with override_settings(DEBUG=debug):
        response = client.get("/boom/")
    assert response.status_code == 500
    text = response.content.decode()
    assert text_of(text, "h1") == "Something went wrong on our side"
    assert "secret detail" not in text  # raw: nowhere in the answer, comments and scripts too
    assert "Traceback" not in text  # raw: (as above)


@override_settings(DEBUG=True)
def test_the_api_keeps_its_json_not_found(viewer: Client) -> None:
    # An editing route: predictions follow the runtime's agent fallback and answer 200.
    response = viewer.get("/api/v1/agents/nobody-here/connections")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")


def test_favicon_ico_leads_to_the_svg_icon_without_a_login() -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("/favicon.svg")


@pytest.mark.parametrize(
    ("typed", "page"),
    [
        ("/tools/", "/live/tools/"),
        ("/tools/?agent=main&window=1h", "/live/tools/?agent=main&window=1h"),
        ("/history/?has=rejection", "/live/history/?has=rejection"),
    ],
)
def test_the_menus_pages_answer_at_the_address_a_user_types(
    viewer: Client, typed: str, page: str
) -> None:
    """History and Tools live under /live/; /tools/ was a 404 in the new-user walkthrough."""
    response = viewer.get(typed, follow=True)
    assert response.redirect_chain == [(page, 302)]
    assert response.status_code == 200


def test_a_shortcut_asks_an_anonymous_user_to_log_in_first() -> None:
    response = Client().get("/tools/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
