"""API authentication: runtime tokens (``Authorization: Bearer …``) and browser sessions."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.errors import AuthorizationError
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


#: A logged-in browser user; unsafe methods need the ``X-CSRFToken`` header (ninja checks it).
session_auth = SessionAuth(csrf=True)
