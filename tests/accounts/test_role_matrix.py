"""The role matrix: EVERY URL pattern and EVERY API operation, as each kind of user, against the
access table (``accounts.access``). A route the table does not name fails here.

Allowed → anything but 401/403 (404, 405, 422… say the route ran its own checks). Refused → 403
(JSON for the API, the HTML page for pages); for an anonymous visitor a redirect to the login
page (pages) or 401 JSON (API). Runtime-token routes refuse every session (401).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from ninja.constants import NOT_SET

from accounts.access import (
    ANY_SCOPE,
    ANY_USER,
    API,
    DOCS,
    EDITOR,
    EDITOR_TO_APPLY,
    JSON_PAGES,
    PAGES,
    PUBLIC,
    PUBLISHER,
    SUPERUSER,
    TOKEN,
    TOKENS,
    VIEWER,
)
from accounts.matrix import COLUMNS, markdown_matrix
from accounts.middleware import REFUSED_HEADER
from accounts.models import Scope
from accounts.tokens import runtime_token_revoke
from config.api import api
from tests.conftest import make_user
from tests.markup import assert_alert
from tests.observe.ingest_support import post_events, started, token

pytestmark = pytest.mark.django_db

ANONYMOUS, NO_ROLE = "anonymous", "no role"
#: Every kind of caller, weakest first (the README's columns).
CALLERS = COLUMNS
RANK = {caller: i for i, caller in enumerate(CALLERS)}
#: The first caller each table value lets in (TOKEN: no session at all).
FIRST = {
    PUBLIC: ANONYMOUS,
    ANY_USER: NO_ROLE,
    DOCS: VIEWER,  # the tests run with DEBUG off, as production does
    VIEWER: VIEWER,
    EDITOR: EDITOR,
    PUBLISHER: PUBLISHER,
    SUPERUSER: SUPERUSER,
}

#: Values for path parameters: objects that exist once ``world`` has run.
PARAMS = {
    "agent": "main",
    "index": "0",
    "key": "search",
    "turn_id": "turn-1",
    "iteration": "0",
    "turn_id_and_iteration": "turn-1/0",
    "number": "1",
    "uidb64": "MQ",
    "token": "set-password",
    "app_label": "auth",
    "object_id": "1",
    "id": "1",
    "content_type_id": "1",
    "url": "nowhere/",
}
#: Query strings a view needs to get past its own input checks.
QUERIES = {"admin:autocomplete": "?app_label=auth&model_name=user&field_name=groups"}


@dataclass(frozen=True)
class Check:
    """One request to make: a route (as the table names it), how to call it, who may."""

    route: str
    method: str
    url: str
    role: str
    api: bool
    data: dict[str, Any] | None = None


def _fill(pattern: str, regex: bool) -> str:
    if regex:
        pattern = pattern.removeprefix("^").removesuffix("$").removesuffix("\\Z")
        return re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: PARAMS.get(m.group(1), "1"), pattern)
    return re.sub(r"<(?:\w+:)?(\w+)>", lambda m: PARAMS.get(m.group(1), "1"), pattern)


def url_patterns(
    patterns: list[Any] | None = None, prefix: str = "/"
) -> Iterator[tuple[str, URLPattern]]:
    """Every URL pattern of config/urls.py, with a URL that resolves to it."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        regex = not hasattr(entry.pattern, "_route")
        url = prefix + _fill(str(entry.pattern), regex)
        if isinstance(entry, URLResolver):
            yield from url_patterns(entry.url_patterns, url)
        else:
            yield url, entry


def page_rules(view_name: str, namespace: str) -> dict[str, str] | None:
    rules = PAGES.get(view_name)
    if rules is None and namespace:
        rules = PAGES.get(f"{namespace}:*")
    return rules


def page_checks(missing: list[str]) -> list[Check]:
    api_paths = {path for _, path in API} | set(api.get_openapi_schema()["paths"])
    checks = []
    for url, pattern in url_patterns():
        match = resolve(url)
        assert match.func == pattern.callback or match.route, url
        template = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", match.route)
        if template in api_paths:
            continue  # an API operation: walked from the OpenAPI schema below
        rules = page_rules(match.view_name, match.namespace)
        url += QUERIES.get(match.view_name, "")
        if rules is None:
            missing.append(f"page {match.view_name} ({url})")
            continue
        for method, role in rules.items():
            for verb in ("GET", "POST") if method == "*" else (method,):
                if role == EDITOR_TO_APPLY:
                    checks.append(Check(match.view_name, verb, url, VIEWER, False, {"op": "x"}))
                    checks.append(Check(match.view_name, verb, url, EDITOR, False, {"op": "apply"}))
                else:
                    json = match.view_name in JSON_PAGES
                    checks.append(Check(match.view_name, verb, url, role, json))
    return checks


def api_checks(missing: list[str]) -> list[Check]:
    checks = []
    for path, operations in api.get_openapi_schema()["paths"].items():
        url = re.sub(r"\{(\w+)\}", lambda m: PARAMS.get(m.group(1), "1"), path)
        for method in operations:
            verb = method.upper()
            role = API.get((verb, path))
            if role is None:
                missing.append(f"API {verb} {path}")
            elif role == EDITOR_TO_APPLY:
                checks.append(Check(path, verb, url + "?dry_run=true", VIEWER, True))
                checks.append(Check(path, verb, url + "?dry_run=false", EDITOR, True))
            else:
                checks.append(Check(path, verb, url, role, True))
    return checks


@pytest.fixture
def world() -> dict[str, Any]:
    """The sample policy, one round, and a user for each kind of caller."""
    call_command("load_sample_policy", stdout=open("/dev/null", "w"))  # noqa: SIM115
    post_events(Client(), [started(turn_id="turn-1")], token("events:write"))
    users = {caller: make_user(f"matrix-{RANK[caller]}", caller) for caller in CALLERS[2:]}
    users[NO_ROLE] = make_user("matrix-none", None)
    return users


def call(check: Check, user: Any) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    do = getattr(client, check.method.lower())
    if check.method == "GET":
        return do(check.url)
    if check.api:
        return do(check.url, data="{}", content_type="application/json")
    return do(check.url, data=check.data or {})


def outcome_ok(check: Check, caller: str, response: Any) -> bool:
    status = response.status_code
    if check.role == TOKEN:
        return status == 401  # a session is not a runtime token
    allowed = RANK[caller] >= RANK[FIRST[check.role]]
    if allowed:
        # A view may still refuse by its own rules (the admin's read-only models answer 403),
        # but never the table, and never "log in" to someone logged in.
        return REFUSED_HEADER not in response and status != 401
    if REFUSED_HEADER not in response:
        return False
    if caller == ANONYMOUS:
        if check.api:
            return status == 401
        return status == 302 and response["Location"].startswith("/accounts/login/?next=")
    return status == 403


def test_every_route_and_role_matches_the_access_table(world: dict[str, Any]) -> None:
    missing: list[str] = []
    checks = page_checks(missing) + api_checks(missing)
    assert not missing, "routes missing from accounts/access.py: " + ", ".join(missing)
    wrong = []
    pairs = 0
    for check in checks:
        for caller in CALLERS:
            response = call(check, world.get(caller))
            pairs += 1
            if not outcome_ok(check, caller, response):
                wrong.append(
                    f"{check.method} {check.url} as {caller}: {response.status_code}"
                    f" (table: {check.role})"
                )
    print(f"role matrix: {pairs} (route, role) pairs checked over {len(checks)} routes")
    assert not wrong, "\n".join(wrong)
    assert pairs == len(checks) * len(CALLERS) >= 6 * 60


def test_a_route_missing_from_the_table_is_refused(
    viewer_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(PAGES, "observe:history")
    monkeypatch.delitem(API, ("GET", "/api/v1/rounds"))
    page = viewer_client.get("/live/history/")
    assert page.status_code == 403
    assert_alert(page.content.decode(), "not in the access table")
    endpoint = viewer_client.get("/api/v1/rounds")
    assert endpoint.status_code == 403
    assert "not in the access table" in endpoint.json()["error"]


def test_a_known_route_with_a_method_it_does_not_take_is_405_not_a_role_refusal(
    viewer_client: Client,
) -> None:
    response = viewer_client.get("/api/v1/agents/main")
    assert response.status_code == 405
    assert set(response["Allow"].split(", ")) == {"DELETE", "PATCH"}
    assert response.json()["error"].startswith("GET is not allowed here")


#: A site the session's cookies may ride along from, but whose requests must not be obeyed.
FOREIGN_ORIGIN = "https://attacker.example"
#: Authorization headers that authenticate nobody.
BOGUS_AUTHORIZATION = ("Bearer x", "Basic dXNlcjpwYXNz", "Bearer tdk_0_0", "Token abc")
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def call_with(check: Check, client: Client, **headers: str) -> Any:
    do = getattr(client, check.method.lower())
    if check.method == "GET":
        return do(check.url, headers=headers)
    if check.api:
        return do(check.url, data="{}", content_type="application/json", headers=headers)
    return do(check.url, data=check.data or {}, headers=headers)


def token_outcome_ok(check: Check, scope: str | None, response: Any) -> bool:
    """What a request carrying ``Authorization`` (a token with ``scope``; ``None``: a bogus or
    revoked one) may get: public routes answer; pages ignore the header (login first); API
    routes take only the scope ``TOKENS`` names, refusing every other token before any view."""
    status = response.status_code
    if check.role == PUBLIC:
        return REFUSED_HEADER not in response
    if not check.api:
        return status == 302 and response["Location"].startswith("/accounts/login/?next=")
    if REFUSED_HEADER not in response and status in (401, 403):
        return False  # a refusal by anything but the table: a view deciding who may
    needed = TOKENS.get((check.method, check.route))
    if scope is None or needed is None:
        return status == 401
    if needed in (ANY_SCOPE, scope):
        return REFUSED_HEADER not in response and status not in (401, 403)
    return status == 403


def test_every_route_refuses_bogus_revoked_and_wrongly_scoped_tokens(
    world: dict[str, Any],
) -> None:
    """Anonymous clients with a bogus or revoked ``Authorization`` header, and a token of each
    scope, against every route: the header never stands in for a login."""
    missing: list[str] = []
    checks = page_checks(missing) + api_checks(missing)
    revoked = token("events:read", "events:write", "config:read", name="matrix-revoked")
    runtime_token_revoke(name="matrix-revoked")
    principals: list[tuple[str | None, str]] = [(None, h) for h in BOGUS_AUTHORIZATION]
    principals.append((None, f"Bearer {revoked}"))
    principals += [(scope, f"Bearer {token(scope)}") for scope in Scope.values]
    wrong = []
    for check in checks:
        for scope, header in principals:
            response = call_with(check, Client(), Authorization=header)
            if not token_outcome_ok(check, scope, response):
                wrong.append(
                    f"{check.method} {check.url} with {header[:12]}… ({scope}):"
                    f" {response.status_code}"
                )
    print(f"token matrix: {len(checks) * len(principals)} requests over {len(checks)} routes")
    assert not wrong, "\n".join(wrong)


def test_every_unsafe_route_refuses_a_session_from_a_foreign_origin(
    world: dict[str, Any],
) -> None:
    """A superuser's session with a valid CSRF token, sent from another site: every unsafe
    page and API route is refused by the CSRF check (token-only routes take no session)."""
    missing: list[str] = []
    checks = [c for c in page_checks(missing) + api_checks(missing) if c.method in UNSAFE]
    client = Client(enforce_csrf_checks=True)
    client.force_login(world[SUPERUSER])
    client.cookies["csrftoken"] = "c" * 32
    wrong = []
    for check in checks:
        response = call_with(check, client, Origin=FOREIGN_ORIGIN, X_CSRFToken="c" * 32)
        if check.role == TOKEN:
            ok = response.status_code == 401
        elif check.api:
            ok = response.status_code == 403 and "Origin" in response.json()["error"]
        else:
            ok = response.status_code == 403
        if not ok:
            wrong.append(f"{check.method} {check.url}: {response.status_code}")
    assert len(checks) >= 40
    assert not wrong, "\n".join(wrong)


def test_the_api_schema_declares_the_credentials_the_table_takes() -> None:
    """The OpenAPI document tells clients what the access table decides: a session wherever a
    role may use the route, a runtime token (of the table's scope) wherever ``TOKENS`` names it."""
    wrong = []
    for prefix, router in api._routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                callbacks = operation.auth_callbacks or (
                    [] if router.auth is NOT_SET else [router.auth]
                )
                template = "/api" + prefix + re.sub(r"\{\w+:(\w+)\}", r"{\1}", path)
                for method in operation.methods:
                    key = (method, template)
                    session = any(type(c).__name__ == "BrowserSessionAuth" for c in callbacks)
                    scopes = {getattr(c, "scope", "") for c in callbacks if hasattr(c, "scope")}
                    wants_session = API[key] not in (PUBLIC, TOKEN)
                    wants_scope = TOKENS.get(key)
                    declared = {ANY_SCOPE if s is None else s for s in scopes}
                    if session != wants_session or declared != (
                        {wants_scope} if wants_scope else set()
                    ):
                        wrong.append(f"{method} {template}: {session=} {declared=}")
    assert not wrong, "\n".join(wrong)


def test_the_documented_matrix_is_the_access_table() -> None:
    """docs/roles.md's matrix is ``python manage.py role_matrix``'s output, so they cannot drift
    (compared row by row: a test that patches the table may leave its rows in another order)."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "roles.md").read_text()
    start = readme.index("Pages (by URL name;")
    block = readme[start : readme.index("\n## ", start)]
    expected = markdown_matrix(PAGES, API, TOKENS)
    assert sorted(block.strip().splitlines()) == sorted(expected.strip().splitlines()), (
        "docs/roles.md's role matrix is stale: paste `python manage.py role_matrix` over it"
    )
