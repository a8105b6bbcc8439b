from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.tokens import runtime_token_create, runtime_token_revoke
from tests.conftest import make_user
from tests.markup import assert_alert, find, find_all, page_text, table_rows, text_of, texts

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client: Client) -> Client:
    make_user("ana", "viewer", password="pw-ana-123")
    client.login(username="ana", password="pw-ana-123")
    return client


def test_it_sends_anonymous_visitors_to_the_login_page(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_the_login_page_renders_for_anonymous_visitors(client: Client) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    form = find(response.content.decode(), "form", method="post")
    assert form.find("input", name="username")
    assert form.find("input", name="password", type="password")


def test_a_wrong_password_is_refused_with_a_message(client: Client) -> None:
    get_user_model().objects.create_user("ana", password="pw-ana-123")
    response = client.post("/accounts/login/", {"username": "ana", "password": "nope"})
    assert response.status_code == 200
    assert_alert(response.content.decode(), "didn't match")


def test_logging_in_lands_on_the_overview(client: Client) -> None:
    make_user("ana", "viewer", password="pw-ana-123")
    response = client.post(
        "/accounts/login/", {"username": "ana", "password": "pw-ana-123"}, follow=True
    )
    assert response.redirect_chain[-1][0] == "/"
    assert text_of(response.content.decode(), "h1") == "Overview"


def test_the_overview_lists_tokens_with_their_last_use(publisher_client: Client) -> None:
    runtime_token_create(name="simulator", scopes=["events:write"])
    runtime_token_create(name="old", scopes=["config:read"])
    runtime_token_revoke(name="old")
    page = publisher_client.get("/").content.decode()
    rows = {row["Name"]: row for row in table_rows(find(page, "table"))}
    assert rows["simulator"]["Last used"] == "never"
    assert rows["simulator"]["Status"] == "active"
    assert rows["old"]["Status"].startswith("revoked ")


def test_the_overview_says_when_there_are_no_tokens(publisher_client: Client) -> None:
    page = publisher_client.get("/").content.decode()
    assert "No runtime tokens yet." in texts(page, "p")
    assert not find_all(page, "table")


def test_the_page_loads_the_vendored_htmx_and_wires_csrf_for_it(logged_in: Client) -> None:
    page = logged_in.get("/").content.decode()
    scripts = [script.attrs.get("src", "") for script in find_all(page, "script")]
    for vendored in ("htmx.", "hx-ws."):
        assert [src for src in scripts if src.startswith(f"/static/vendor/htmx/4.0.1/{vendored}")]
    headers = json.loads(find(page, "body").attrs["hx-headers:inherited"])
    assert headers["x-csrftoken"]
    assert all(src.startswith("/static/") for src in scripts if src)  # nothing from a CDN


def test_logout_ends_the_session(logged_in: Client) -> None:
    response = logged_in.post("/accounts/logout/")
    assert response.status_code == 302
    assert logged_in.get("/").status_code == 302


def test_the_api_docs_serve_their_assets_locally(logged_in: Client) -> None:
    page = logged_in.get("/api/docs").content.decode()
    assets = [script.attrs["src"] for script in find_all(page, "script", src=None)]
    assets += [link.attrs["href"] for link in find_all(page, "link", rel="stylesheet")]
    assert [src for src in assets if src.startswith("/static/ninja/")]
    assert all(src.startswith("/static/") for src in assets), assets  # nothing from a CDN


def test_the_overview_says_when_no_rounds_arrived_yet(logged_in: Client) -> None:
    page = logged_in.get("/").content.decode()
    empty = find(page, "p", class_="rounds-empty")
    assert empty.text.startswith("No rounds yet.")
    assert "Watch rounds live" in [link.text for link in find_all(page, "a", href="/live/")]


def test_the_overview_counts_stored_rounds(logged_in: Client) -> None:
    from datetime import UTC, datetime

    from observe.services import events_ingest

    now = datetime.now(UTC).isoformat()
    events = [
        {
            "event_id": f"00000000-0000-4000-8000-00000000000{i}",
            "ts": now,
            "agent": "main",
            "turn_id": f"t{i}",
            "iteration": 0,
            "type": "round.started",
            "max_actions": 2,
        }
        for i in range(3)
    ]
    assert events_ingest(events).accepted == 3
    page = logged_in.get("/").content.decode()
    assert text_of(page, "strong", class_="rounds-count") == "3"
    assert "3 rounds stored," in page_text(page)
    assert "3 in the last hour" in page_text(page)


def test_the_overview_says_which_react_agent_predictions_assume(
    logged_in: Client, settings: object
) -> None:
    setattr(settings, "TRAITDECK_REACT_AGENT_VERSION", "v2")  # noqa: B010
    page = logged_in.get("/").content.decode()
    said = " ".join(text_of(page, "p", id="react-assumption").split())
    assert "react agent v2" in said
    assert "never starts a tool early" in said
    assert not find_all(page, id="react-version-invalid")
    setattr(settings, "TRAITDECK_REACT_AGENT_VERSION", "v4")  # noqa: B010
    page = logged_in.get("/").content.decode()
    assert "v4 is neither v2 nor v3: read as v2" in text_of(
        page, "span", id="react-version-invalid"
    )
