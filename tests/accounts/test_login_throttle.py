"""Failed logins are limited per account and per client address (the cache counts them)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from django.test import Client, override_settings

from tests.conftest import make_user
from tests.markup import assert_alert

pytestmark = pytest.mark.django_db

PASSWORD = "pw-right-123"


@pytest.fixture(autouse=True)
def limit() -> Iterator[None]:
    # The test settings turn the limit off for every other suite; these tests use the default.
    with override_settings(TRAITDECK_LOGIN_MAX_ATTEMPTS=10, TRAITDECK_LOGIN_WINDOW_S=900):
        yield


@pytest.fixture
def username() -> str:
    # Unique names and addresses: the counts live in the cache (Redis under make test-scale).
    name = f"throttled-{uuid.uuid4().hex[:10]}"
    make_user(name, "viewer", password=PASSWORD)
    return name


def address() -> str:
    return f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"


def attempt(client: Client, username: str, password: str) -> int:
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return int(response.status_code)


def fail(client: Client, username: str, times: int) -> None:
    for _ in range(times):
        assert attempt(client, username, "wrong") == 200


def test_the_eleventh_attempt_is_refused_even_with_the_right_password(username: str) -> None:
    client = Client(REMOTE_ADDR=address())
    fail(client, username, 10)
    response = client.post("/accounts/login/", {"username": username, "password": PASSWORD})
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 900
    refusal = assert_alert(response.content.decode(), "Too many failed logins")
    assert "Try again in 15 minutes." in refusal
    assert "_auth_user_id" not in client.session


def test_the_account_stays_throttled_from_another_address(username: str) -> None:
    fail(Client(REMOTE_ADDR=address()), username, 10)
    assert attempt(Client(REMOTE_ADDR=address()), username, PASSWORD) == 429


def test_the_address_stays_throttled_for_another_account(username: str) -> None:
    client = Client(REMOTE_ADDR=address())
    fail(client, f"nobody-{uuid.uuid4().hex[:8]}", 10)
    assert attempt(client, username, PASSWORD) == 429


def test_a_successful_login_before_the_limit_resets_the_account(username: str) -> None:
    fail(Client(REMOTE_ADDR=address()), username, 9)
    assert attempt(Client(REMOTE_ADDR=address()), username, PASSWORD) == 302
    # Nine more failures (from a third address) stay under the limit again.
    client = Client(REMOTE_ADDR=address())
    fail(client, username, 9)
    assert attempt(client, username, PASSWORD) == 302


def test_no_limit_when_the_setting_is_zero(username: str) -> None:
    client = Client(REMOTE_ADDR=address())
    with override_settings(TRAITDECK_LOGIN_MAX_ATTEMPTS=0):
        fail(client, username, 12)
        assert attempt(client, username, PASSWORD) == 302


def test_the_test_settings_relax_the_limit() -> None:
    # Every other test logs in many times from one address.
    from config import settings_test

    assert settings_test.TRAITDECK_LOGIN_MAX_ATTEMPTS == 0


@pytest.mark.parametrize("variant", ["{} ", " {}", "{}\t", "FULLWIDTH"])
def test_a_spelling_django_logs_in_as_the_account_is_throttled_with_it(
    username: str, variant: str
) -> None:
    """Django's login form strips the username and NFKC-normalises it: every spelling that logs
    in as the account counts against it (a full-width ｖｉｃｔｉｍ is victim)."""
    fail(Client(REMOTE_ADDR=address()), username, 10)
    if variant == "FULLWIDTH":
        spelled = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in username)
    else:
        spelled = variant.format(username)
    assert attempt(Client(REMOTE_ADDR=address()), spelled, PASSWORD) == 429


def test_a_forwarded_for_header_chosen_by_the_client_moves_nothing_by_default(
    username: str,
) -> None:
    """With no trusted proxy (the default), X-Forwarded-For is the client's own text: rotating it
    does not give a fresh address count."""
    peer = address()
    for i in range(10):
        client = Client(REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=f"203.0.113.{i}")
        assert attempt(client, f"nobody-{uuid.uuid4().hex[:8]}", "wrong") == 200
    rotated = Client(REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert attempt(rotated, username, PASSWORD) == 429


def test_behind_one_trusted_proxy_the_address_it_saw_counts(username: str) -> None:
    """One trusted hop: the last X-Forwarded-For entry (what the proxy saw) is the client; what
    the client wrote before it is ignored."""
    real = address()
    with override_settings(TRAITDECK_TRUSTED_PROXY_HOPS=1):
        for i in range(10):
            client = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"10.9.9.{i}, {real}")
            assert attempt(client, f"nobody-{uuid.uuid4().hex[:8]}", "wrong") == 200
        same = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"1.2.3.4, {real}")
        assert attempt(same, username, PASSWORD) == 429
        other = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=address())
        assert attempt(other, username, PASSWORD) == 302


def test_the_lockout_answer_is_the_same_for_an_existing_and_an_unknown_account(
    username: str,
) -> None:
    unknown = f"ghost-{uuid.uuid4().hex[:10]}"
    answers = []
    for name in (username, unknown):
        client = Client(REMOTE_ADDR=address())
        fail(client, name, 10)
        response = client.post("/accounts/login/", {"username": name, "password": PASSWORD})
        body = re.sub(r"[A-Za-z0-9]{64}", "CSRF", response.content.decode())
        body = body.replace(name, "NAME")
        answers.append((response.status_code, response["Retry-After"], body))
    assert answers[0][0] == 429
    assert answers[0] == answers[1]
