"""The demo superuser (public password) works in demo mode only."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from tests.markup import page_text

pytestmark = pytest.mark.django_db

DEMO = {"username": "demo", "password": "demo-traitdeck"}


@pytest.fixture
def demo_account() -> None:
    with override_settings(DEMO=True):
        call_command("ensure_demo_admin", stdout=open("/dev/null", "w"))  # noqa: SIM115


def log_in(client: Client) -> int:
    return int(client.post("/accounts/login/", DEMO).status_code)


@pytest.mark.usefixtures("demo_account")
def test_it_logs_the_demo_account_in_in_demo_mode() -> None:
    client = Client()
    with override_settings(DEMO=True):
        assert log_in(client) == 302
        assert client.get("/").status_code == 200


@pytest.mark.usefixtures("demo_account")
@override_settings(DEMO=False)
def test_it_refuses_the_demo_account_outside_demo_mode() -> None:
    client = Client()
    response = client.post("/accounts/login/", DEMO)
    assert response.status_code == 200
    assert "didn't match" in page_text(response.content.decode())
    assert client.get("/").status_code == 302


@pytest.mark.usefixtures("demo_account")
def test_a_demo_session_ends_when_the_server_leaves_demo_mode() -> None:
    client = Client()
    with override_settings(DEMO=True):
        assert log_in(client) == 302
    with override_settings(DEMO=False):
        response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@override_settings(DEMO=False)
def test_other_accounts_log_in_outside_demo_mode() -> None:
    from tests.conftest import make_user

    make_user("maria", "viewer", password="pw-maria-123")
    assert (
        Client().post("/accounts/login/", {"username": "maria", "password": "pw-maria-123"})[
            "Location"
        ]
        == "/"
    )
