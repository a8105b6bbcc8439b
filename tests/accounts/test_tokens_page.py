"""The runtime tokens page: publishers create (the secret shown once), list and revoke."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import RuntimeToken
from accounts.tokens import runtime_token_authenticate, runtime_token_create
from audit.models import AuditEntry
from tests.markup import assert_alert, find, table_rows, text_of, texts

pytestmark = pytest.mark.django_db

TOKENS = "/tokens/"
SECRET = re.compile(r"tdk_[0-9a-f]+_[A-Za-z0-9_-]+")


def create(client: Client, name: str = "sim", scopes: tuple[str, ...] = ("config:read",)) -> str:
    response = client.post(TOKENS, {"name": name, "scopes": list(scopes)})
    assert response.status_code == 200, response.content
    return response.content.decode()


def test_it_shows_the_secret_once_and_the_secret_works(publisher_client: Client) -> None:
    html = create(publisher_client, scopes=("config:read", "events:write"))
    (secret,) = set(SECRET.findall(html))
    assert "it is shown only this once" in assert_alert(html, "Copy the secret now")
    assert find(html, "code", id="secret-value").text == secret
    assert find(html, "button", data_copy="#secret-value").text == "Copy"
    token = runtime_token_authenticate(secret)
    assert token is not None
    assert token.scopes == ["config:read", "events:write"]
    # Never again: not on the list, not on a reload.
    # raw: the secret must be nowhere in the answer, not even in an attribute or a script.
    assert not SECRET.search(publisher_client.get(TOKENS).content.decode())


def test_the_page_with_the_secret_is_never_cached(publisher_client: Client) -> None:
    response = publisher_client.post(TOKENS, {"name": "sim", "scopes": ["config:read"]})
    assert "no-store" in response["Cache-Control"]


def test_it_lists_tokens_with_scopes_last_use_and_status(publisher_client: Client) -> None:
    issued = runtime_token_create(name="sim", scopes=["events:write"])
    runtime_token_authenticate(issued.secret)
    runtime_token_create(name="old", scopes=["config:read"])
    RuntimeToken.objects.filter(name="old").update(revoked_at=issued.token.created_at)
    html = publisher_client.get(TOKENS).content.decode()
    rows = {row["Name"]: row for row in table_rows(find(html, "table", id="token-list"))}
    assert rows["sim"]["Scopes"] == "events:write"
    assert rows["sim"]["Last used"].endswith(" ago")
    assert rows["sim"]["Status"] == "active"
    assert rows["old"]["Status"].startswith("revoked ")
    assert rows["old"]["Last used"] == "never"


def test_it_records_who_created_a_token(publisher_client: Client) -> None:
    create(publisher_client)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.actor_name, entry.target) == (
        "token.create",
        "as-publisher",
        "token sim",
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "sim", "scopes": []}, "Choose at least one scope."),
        ({"name": "sim", "scopes": ["admin"]}, "Select a valid choice"),
        ({"name": "has space", "scopes": ["config:read"]}, "A token name is"),
        ({"name": "", "scopes": ["config:read"]}, "This field is required."),
    ],
)
def test_it_refuses_a_bad_form_with_422(
    publisher_client: Client, data: dict[str, object], message: str
) -> None:
    response = publisher_client.post(TOKENS, data)
    assert response.status_code == 422
    errors = texts(response.content.decode(), class_="error")
    assert any(message in error for error in errors), errors
    assert not RuntimeToken.objects.exists()


def test_it_refuses_a_taken_name(publisher_client: Client) -> None:
    runtime_token_create(name="sim", scopes=["config:read"])
    response = publisher_client.post(TOKENS, {"name": "sim", "scopes": ["config:read"]})
    assert response.status_code == 422
    errors = texts(response.content.decode(), class_="error")
    assert any("already exists" in error for error in errors), errors
    assert RuntimeToken.objects.count() == 1


def test_revoking_asks_first_then_revokes_and_records_it(publisher_client: Client) -> None:
    issued = runtime_token_create(name="sim", scopes=["config:read"])
    url = f"/tokens/{issued.token.pk}/revoke/"
    confirm = publisher_client.get(url)
    assert confirm.status_code == 200
    assert text_of(confirm.content.decode(), "form", id="token-revoke").startswith("Revoke sim")
    assert runtime_token_authenticate(issued.secret) is not None
    response = publisher_client.post(url, follow=True)
    assert response.status_code == 200
    assert_alert(response.content.decode(), "Revoked sim")
    assert runtime_token_authenticate(issued.secret) is None
    entry = AuditEntry.objects.get(action="token.revoke")
    assert entry.actor_name == "as-publisher"


def test_revoking_an_unknown_token_is_404(publisher_client: Client) -> None:
    assert publisher_client.post("/tokens/999/revoke/").status_code == 404


@pytest.mark.parametrize("fixture", ["viewer_client", "editor_client"])
def test_only_publishers_manage_tokens(request: pytest.FixtureRequest, fixture: str) -> None:
    client: Client = request.getfixturevalue(fixture)
    issued = runtime_token_create(name="sim", scopes=["config:read"])
    assert client.get(TOKENS).status_code == 403
    assert client.post(TOKENS, {"name": "x", "scopes": ["config:read"]}).status_code == 403
    assert client.post(f"/tokens/{issued.token.pk}/revoke/").status_code == 403
    assert RuntimeToken.objects.count() == 1
    assert runtime_token_authenticate(issued.secret) is not None
