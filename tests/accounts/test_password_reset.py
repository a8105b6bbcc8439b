"""Password reset is offered only where mail can be sent (EMAIL_HOST: PASSWORD_RESET_ENABLED)."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client, override_settings

from tests.conftest import make_user
from tests.markup import find_all

pytestmark = pytest.mark.django_db

RESET_PAGES = [
    "/accounts/password_reset/",
    "/accounts/password_reset/done/",
    "/accounts/reset/MQ/set-password/",
    "/accounts/reset/done/",
]


@override_settings(PASSWORD_RESET_ENABLED=False)
@pytest.mark.parametrize("url", RESET_PAGES)
def test_the_reset_pages_are_404_without_mail(url: str) -> None:
    assert Client().get(url).status_code == 404


@override_settings(PASSWORD_RESET_ENABLED=False)
def test_the_login_page_does_not_offer_a_reset_without_mail() -> None:
    page = Client().get("/accounts/login/")
    assert page.status_code == 200
    assert find_all(page.content.decode(), "input", name="username")
    assert not find_all(page.content.decode(), "a", href="/accounts/password_reset/")


@override_settings(PASSWORD_RESET_ENABLED=True)
def test_the_login_page_links_to_the_reset_with_mail() -> None:
    page = Client().get("/accounts/login/")
    [reset] = find_all(page.content.decode(), "a", href="/accounts/password_reset/")
    assert reset.text == "Forgot your password?"


@override_settings(
    PASSWORD_RESET_ENABLED=True,
    MAILERS={"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}},
)
def test_a_reset_mails_a_link_that_sets_a_new_password() -> None:
    user = make_user("rosa", "viewer")
    user.email = "rosa@example.com"
    user.save()
    client = Client()
    sent = client.post("/accounts/password_reset/", {"email": "rosa@example.com"})
    assert sent.status_code == 302
    assert sent["Location"] == "/accounts/password_reset/done/"
    assert len(mail.outbox) == 1
    link = re.search(r"/accounts/reset/[^/]+/[^/\s]+/", mail.outbox[0].body)
    assert link, mail.outbox[0].body
    form = client.get(link.group(0), follow=True)
    assert form.status_code == 200
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-new-pw-4567", "new_password2": "a-new-pw-4567"},
    )
    assert done.status_code == 302
    assert done["Location"] == "/accounts/reset/done/"
    assert Client().login(username="rosa", password="a-new-pw-4567")
