"""Whether a long-lived connection (the live websocket) may still run for its session."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user, get_user_model
from django.http import HttpRequest

from accounts.roles import has_role


def session_allows(
    user: Any, session_key: str | None, *, role: str, unauthenticated: int, forbidden: int
) -> int | None:
    """``None`` while the connection may go on; else the close code that says why.

    With a session, it is read again from the store (a logout deletes it, an expired one reads
    as empty) and must still name the same, still active user; without one (tests that put a
    user straight into the scope) the user row is read again. Then the role must still hold.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return unauthenticated
    current: Any
    if session_key is not None:
        request = HttpRequest()
        request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        current = get_user(request)
    else:
        current = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    if current is None or not current.is_authenticated or current.pk != user.pk:
        return unauthenticated
    return None if has_role(current, role) else forbidden
