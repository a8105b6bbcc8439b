"""API authentication: runtime tokens (``Authorization: Bearer …``) and browser sessions."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponseForbidden
from django.middleware.csrf import CsrfViewMiddleware
from ninja.security import HttpBearer, SessionAuth

from accounts.models import RuntimeToken


class RuntimeTokenAuth(HttpBearer):
    """A runtime token with ``scope`` (any scope when ``None``), as the OpenAPI schema tells
    clients. ``AccessMiddleware`` has already authenticated it from the access table
    (``accounts.access.TOKENS``, where ``tests/accounts`` holds each route's scope equal to
    this one); here the token it admitted is only handed to the view.
    """

    def __init__(self, scope: str | None) -> None:
        super().__init__()
        self.scope = scope

    def __call__(self, request: HttpRequest) -> RuntimeToken | None:
        principal = getattr(request, "principal", None)
        return principal if isinstance(principal, RuntimeToken) else None

    def authenticate(self, request: HttpRequest, token: str) -> RuntimeToken | None:
        return self(request)  # pragma: no cover - __call__ answers without parsing the header


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

    ``AccessMiddleware`` decides both from the access table before the view (who is asking
    first — no session → 401 — then the CSRF check → 403 JSON with Django's reason); here the
    user it admitted is only handed to the view.
    """

    def __call__(self, request: HttpRequest) -> Any:
        principal = getattr(request, "principal", None)
        return None if principal is None or isinstance(principal, RuntimeToken) else principal


#: A logged-in browser user; unsafe methods need the ``X-CSRFToken`` header.
session_auth = BrowserSessionAuth(csrf=True)
