"""API authentication: runtime tokens (``Authorization: Bearer …``) and browser sessions."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseForbidden
from django.middleware.csrf import CsrfViewMiddleware
from ninja.errors import AuthorizationError, HttpError
from ninja.security import HttpBearer, SessionAuth

from accounts.models import RuntimeToken
from accounts.tokens import runtime_token_authenticate


class RuntimeTokenAuth(HttpBearer):
    """A bearer token that must carry ``scope`` (any scope when ``None``).

    Missing, unknown or revoked token → 401; a valid token without the scope → 403.
    """

    def __init__(self, scope: str | None) -> None:
        super().__init__()
        self.scope = scope

    def authenticate(self, request: HttpRequest, token: str) -> RuntimeToken | None:
        runtime_token = runtime_token_authenticate(token)
        if runtime_token is None:
            return None
        if self.scope is not None and not runtime_token.has_scope(self.scope):
            raise AuthorizationError(
                message=f"this token lacks the {self.scope!r} scope",
            )
        return runtime_token


class _CsrfCheck(CsrfViewMiddleware):
    """Django's own CSRF check, telling why it refused instead of rendering its HTML page."""

    def _reject(self, request: HttpRequest, reason: str) -> HttpResponseForbidden:
        raise _CsrfRefused(reason)


class _CsrfRefused(Exception):
    pass


def csrf_refusal(request: HttpRequest) -> str | None:
    """Why Django's CSRF check refuses ``request`` (``None``: it passes)."""
    check = _CsrfCheck(_no_view)
    request.csrf_processing_done = False  # type: ignore[attr-defined]
    check.process_request(request)
    try:
        check.process_view(request, _no_view, (), {})
    except _CsrfRefused as exc:
        return str(exc)
    return None


def _no_view(request: HttpRequest) -> HttpResponseForbidden:  # pragma: no cover - never called
    return HttpResponseForbidden()


class BrowserSessionAuth(SessionAuth):
    """A logged-in browser user; unsafe methods need the ``X-CSRFToken`` header.

    Ninja's ``SessionAuth`` checks CSRF before it knows whether anyone is logged in, so a request
    without a session (e.g. with a runtime token on a session-only route) got "CSRF check
    Failed" (403) instead of 401. Here who is asking comes first: no logged-in user → 401; a
    logged-in user whose write fails the CSRF check → 403 JSON with Django's reason.
    """

    def _get_key(self, request: HttpRequest) -> str | None:
        if not request.user.is_authenticated:
            return None  # authenticate() answers None: 401
        if self.csrf and not getattr(request, "_ninja_csrf_exempt", False):
            reason = csrf_refusal(request)
            if reason is not None:
                raise HttpError(
                    403,
                    f"CSRF check failed ({reason.rstrip('.')}): send the csrftoken cookie's value"
                    " as the X-CSRFToken header.",
                )
        return request.COOKIES.get(self.param_name)


#: A logged-in browser user; unsafe methods need the ``X-CSRFToken`` header.
session_auth = BrowserSessionAuth(csrf=True)
