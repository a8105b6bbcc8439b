"""The one place roles are enforced: every request is checked against ``accounts.access``.

Pages: an anonymous visitor is sent to the login page; a logged-in user without the role gets
the HTML 403 page (a user with no role at all is told whom to ask). API: 401 JSON without a
login, 403 JSON without the role. A route the table does not name is refused.

Authentication is decided here, once, before any view: an API request carrying an
``Authorization`` header is judged by that runtime token alone (``access.TOKENS``); otherwise
by its session, whose unsafe API requests also pass Django's CSRF check here (the API's views
are CSRF-exempt for Django's own middleware). The principal goes to ``request.principal`` for
the API's auth classes to hand on; no view authenticates anybody itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.urls import ResolverMatch
from django_htmx.http import reswap, retarget

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
    SUPERUSER,
    TOKEN,
    TOKENS,
    VIEWER,
)
from accounts.auth import csrf_refusal
from accounts.roles import has_role, role_granters, user_role
from accounts.tokens import runtime_token_authenticate
from core.numbers import parse_whole

#: ``<int:index>`` / ``<agent>`` in a Django route → ``{index}`` / ``{agent}`` as in OpenAPI.
_ROUTE_PARAM = re.compile(r"<(?:\w+:)?(\w+)>")
#: What pydantic (hence ninja) reads as ``False`` in a query string.
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})

#: Set on every refusal made here, so a refusal by the table can be told from a view's own
#: (the admin's read-only models answer 403 themselves).
REFUSED_HEADER = "X-Access-Refused"

UNAUTHENTICATED = (
    "Authentication required: log in, or send a runtime token as 'Authorization: Bearer …'."
)
#: Methods that change nothing, so a session needs no CSRF token for them (as Django's).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


@dataclass(frozen=True)
class Rule:
    """What one request needs: ``role`` (a table value) and whether it is an API route."""

    role: str | None  # None: the route (or this method of it) is not in the table
    api: bool
    route: str
    #: The scope a runtime token needs here (``None``: no token is taken).
    token_scope: str | None = None


def _method(request: HttpRequest) -> str:
    method = (request.method or "GET").upper()
    return "GET" if method in ("HEAD", "OPTIONS") else method


def api_template(match: ResolverMatch) -> str:
    """The OpenAPI path template of a resolved ninja route (``/api/v1/agents/{agent}``)."""
    return "/" + _ROUTE_PARAM.sub(r"{\1}", match.route)


def rule_for(request: HttpRequest, match: ResolverMatch) -> Rule:
    method = _method(request)
    template = api_template(match)
    if any(path == template for _, path in API):
        key = (method, template)
        return Rule(
            API.get(key), api=True, route=f"{method} {template}", token_scope=TOKENS.get(key)
        )
    rules = PAGES.get(match.view_name)
    if rules is None and match.namespace:
        rules = PAGES.get(f"{match.namespace}:*")
    role = None if rules is None else rules.get(method, rules.get("*"))
    # A URL the table does not know, under /api/, still answers in JSON.
    is_api = (rules is None and request.path_info.startswith("/api/")) or (
        match.view_name in JSON_PAGES
    )
    return Rule(role, api=is_api, route=f"{method} {match.view_name}")


def _applies(request: HttpRequest, api: bool) -> bool:
    """Whether an import request replaces the draft (rather than previewing it)."""
    if api:
        return any(v.strip().lower() in _FALSE for v in request.GET.getlist("dry_run"))
    declared = request.META.get("CONTENT_LENGTH") or "0"
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    size = parse_whole(declared)
    if limit is not None and (size is None or size > limit):
        # Reading a body this large here would leave the view nothing to answer 413 with; it
        # cannot be a preview-only request we can vouch for, so it needs the editor role.
        return True
    try:
        return "apply" in request.POST.getlist("op")
    except RequestDataTooBig:
        return True


def required_role(request: HttpRequest, rule: Rule) -> str | None:
    if rule.role == DOCS:
        return PUBLIC if settings.DEBUG else VIEWER
    if rule.role == EDITOR_TO_APPLY:
        return EDITOR if _applies(request, rule.api) else VIEWER
    return rule.role


def _denied_page(request: HttpRequest, message: str, *, no_role: bool) -> HttpResponse:
    context = {"message": message, "no_role": no_role, "granters": role_granters()}
    if getattr(request, "htmx", False):
        # An htmx swap targets a fragment: show the refusal in place of the page's content.
        response = render(request, "403.html#denied", context, status=403)
        return reswap(retarget(response, "#main"), "innerHTML")
    return render(request, "403.html", context, status=403)


def _refuse(request: HttpRequest, rule: Rule, message: str, *, no_role: bool) -> HttpResponse:
    if rule.api:
        return JsonResponse({"error": message}, status=403)
    return _denied_page(request, message, no_role=no_role)


def check_access(request: HttpRequest, match: ResolverMatch) -> HttpResponseBase | None:
    """``None`` when the request may go on, else the refusal to send."""
    refusal = _check(request, match)
    if refusal is not None and refusal.status_code != 405:
        refusal[REFUSED_HEADER] = "login" if refusal.status_code in (301, 302, 401) else "role"
    return refusal


def _check(request: HttpRequest, match: ResolverMatch) -> HttpResponseBase | None:
    rule = rule_for(request, match)
    if rule.api and rule.role is None:
        allowed = sorted(m for m, path in API if path == api_template(match))
        if allowed:
            # The route exists for other methods: the method is wrong, not the role.
            response = JsonResponse(
                {"error": f"{_method(request)} is not allowed here; use {', '.join(allowed)}."},
                status=405,
            )
            response["Allow"] = ", ".join(allowed)
            return response
    role = required_role(request, rule)
    if role == PUBLIC:
        return None
    if rule.api and "Authorization" in request.headers:
        # A header a browser never sends by itself: the token alone decides, never the session
        # that may ride along (so a bogus or revoked token is refused, not waved through).
        return _token_check(request, rule, request.headers["Authorization"])
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        if not rule.api:
            return redirect_to_login(request.get_full_path())
        return JsonResponse({"error": UNAUTHENTICATED}, status=401)
    if role == TOKEN:
        return JsonResponse({"error": UNAUTHENTICATED}, status=401)
    if role is None:
        return _refuse(
            request,
            rule,
            f"{rule.route} is not in the access table, so nobody may use it.",
            no_role=False,
        )
    if role == ANY_USER or has_role(user, role):
        return _session_admitted(request, rule, user)
    if user_role(user) is None:
        return _refuse(
            request,
            rule,
            "Your account has no role yet: ask a publisher or an administrator to give you one.",
            no_role=True,
        )
    needed = "a superuser" if role == SUPERUSER else f"the {role} role"
    return _refuse(request, rule, f"This needs {needed}.", no_role=False)


def _token_check(request: HttpRequest, rule: Rule, header: str) -> HttpResponseBase | None:
    scheme, _, secret = header.partition(" ")
    if rule.token_scope is None or scheme.lower() != "bearer" or not secret.strip():
        return JsonResponse({"error": UNAUTHENTICATED}, status=401)
    token = runtime_token_authenticate(secret.strip())
    if token is None:
        return JsonResponse({"error": UNAUTHENTICATED}, status=401)
    if rule.token_scope != ANY_SCOPE and not token.has_scope(rule.token_scope):
        return JsonResponse(
            {"error": f"Not allowed: this token lacks the {rule.token_scope!r} scope."},
            status=403,
        )
    request.principal = token  # type: ignore[attr-defined]
    return None


def _session_admitted(request: HttpRequest, rule: Rule, user: Any) -> HttpResponseBase | None:
    if rule.api and (request.method or "GET").upper() not in SAFE_METHODS:
        reason = csrf_refusal(request)
        if reason is not None:
            return JsonResponse(
                {
                    "error": f"CSRF check failed ({reason.rstrip('.')}): send the csrftoken"
                    " cookie's value as the X-CSRFToken header."
                },
                status=403,
            )
    request.principal = user  # type: ignore[attr-defined]
    return None


class AccessMiddleware:
    """Checks every resolved request against the access table (after authentication)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponseBase | None:
        match = request.resolver_match
        if match is None:  # pragma: no cover - process_view always follows URL resolution
            return None
        return check_access(request, match)
