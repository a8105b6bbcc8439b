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
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from accounts.access import (
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
    VIEWER,
)
from accounts.matrix import COLUMNS
from accounts.middleware import REFUSED_HEADER
from config.api import api
from tests.conftest import make_user
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
    assert b"not in the access table" in page.content
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
