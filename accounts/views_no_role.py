"""The page a logged-in user without a role sees."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.roles import role_granters, user_role


def no_role(request: HttpRequest) -> HttpResponse:
    """Whom to ask for a role (open to every logged-in user, with a role or without)."""
    return render(
        request,
        "accounts/no_role.html",
        {"role": user_role(request.user), "granters": role_granters()},
    )
