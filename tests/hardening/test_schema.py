"""schemathesis over the whole OpenAPI schema, in process: no 5xx, every answer as documented.

Each operation is one test; its examples run against an instance holding the sample policy, a
published version and stored rounds, with a superuser's session (cookie + ``X-CSRFToken``) for
the operations a session may call and a runtime token with every scope for the machine-only ones.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from accounts.models import Scope
from config.api import api
from policy.versions import policy_publish
from tests.observe.ingest_support import (
    load_sample_into_draft,
    post_events,
    simulated_rounds,
    token,
)

#: Examples per operation: 32 operations × 150 ≈ 4,650 requests, about 2.5 minutes on two cores.
EXAMPLES_PER_OPERATION = 150
#: Every other check runs: no 5xx, documented statuses, content types, headers and bodies as the
#: schema says, and a 401 once the credential is taken away. These two judge which requests the
#: server accepts, not what it answers:
#: - positive_data_acceptance: the schema cannot state every rule a handler checks (``since``
#:   is ISO 8601 *or* a span like ``7d``, an agent name's pattern, a publish message that is not
#:   blank), so a schema-valid request may get its documented 422;
#: - negative_data_rejection: ninja ignores query parameters it does not know (as most HTTP APIs
#:   do), so a request the schema calls invalid may be answered 200.
#: Both kinds of request are still sent and still held to every other check.
NOT_CHECKED = [positive_data_acceptance, negative_data_rejection]


def _load_schema() -> Any:
    """The schema the API serves at ``/api/openapi.json`` (read from the API object: serving it
    needs a login, and this runs at collection time, before any database exists)."""
    loaded = schemathesis.openapi.from_dict(api.get_openapi_schema())
    loaded.app = get_wsgi_application()
    return loaded


schema = _load_schema()

#: The credentials of the running test (the database, and so the session and the token, are new
#: for each test): set by the ``credentials`` fixture, read by the auth provider.
CREDENTIALS: dict[str, str] = {}


@schema.auth(refresh_interval=None)
class TraitdeckAuth:
    """One credential per request, as clients send them, so that schemathesis can take it away
    and expect a 401: the session where the operation takes one, else the token."""

    def get(self, case: schemathesis.Case, ctx: schemathesis.AuthContext) -> dict[str, str]:
        return dict(CREDENTIALS)

    def set(
        self, case: schemathesis.Case, data: dict[str, str], ctx: schemathesis.AuthContext
    ) -> None:
        if not data:  # at collection time, before the fixture ran
            return
        security = case.operation.definition.raw.get("security", [])
        schemes = {name for entry in security for name in entry}
        cookies = dict(case.cookies or {})
        headers = dict(case.headers or {})
        if "SessionAuth" in schemes:
            cookies.update(sessionid=data["session"], csrftoken=data["csrf"])
            headers["X-CSRFToken"] = data["csrf"]
        elif "RuntimeTokenAuth" in schemes:
            headers["Authorization"] = f"Bearer {data['token']}"
        case.cookies = cookies
        case.headers = headers


@pytest.fixture
def credentials(admin_user: Any) -> None:
    """An instance with the sample policy, a published version and stored rounds, and the
    credentials of a superuser and of a token with every scope."""
    load_sample_into_draft()
    policy_publish(actor=admin_user, message="schemathesis", confirm_warnings=True)
    secret = token(*Scope.values)
    for batch in simulated_rounds(3):
        post_events(Client(), batch, secret)
    client = Client()
    client.force_login(admin_user)
    CREDENTIALS.update(
        session=client.cookies["sessionid"].value, csrf=secrets.token_hex(16), token=secret
    )


# transaction=True: requests go straight to the WSGI application, which closes the database
# connection after each one (the test client does not); on PostgreSQL that would end the test's
# own transaction. Each operation's test starts from an empty database instead.
@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_the_api_answers_every_request_as_its_schema_says(
    case: schemathesis.Case, credentials: None
) -> None:
    case.call_and_validate(excluded_checks=NOT_CHECKED)
