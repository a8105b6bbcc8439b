"""The runtime tokens page (publishers): create — the secret shown once — list, revoke.

The browser and ``manage.py runtime_token`` call the same services (``accounts.tokens``), so a
token made either way is the same token, and both record the same audit entries.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods

from accounts.forms import TokenCreateForm
from accounts.models import RuntimeToken
from accounts.selectors import runtime_token_list
from accounts.tokens import IssuedToken, TokenExists, TokenNotFound, runtime_token_create
from accounts.tokens import runtime_token_revoke as runtime_token_revoke_service

TOKENS_TEMPLATE = "accounts/tokens.html"
REVOKE_TEMPLATE = "accounts/token_revoke.html"


def _page(
    request: HttpRequest,
    form: TokenCreateForm,
    *,
    issued: IssuedToken | None = None,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {"form": form, "tokens": runtime_token_list(), "issued": issued}
    response = render(request, TOKENS_TEMPLATE, context, status=status)
    # The page with a secret on it must not be kept by the browser or a proxy: reloading it
    # or going back must not show the secret again.
    add_never_cache_headers(response)
    return response


@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """The list and the create form; a created token's secret is shown on the answer to the
    POST only (never stored, never redirected to)."""
    if request.method == "GET":
        return _page(request, TokenCreateForm())
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=422)
    try:
        issued = runtime_token_create(
            name=form.cleaned_data["name"], scopes=form.cleaned_data["scopes"], actor=request.user
        )
    except TokenExists:
        form.add_error(
            "name",
            "A token with this name already exists: choose another name, or revoke the old one"
            " and rotate it with `manage.py runtime_token create NAME --rotate`.",
        )
        return _page(request, form, status=422)
    return _page(request, TokenCreateForm(), issued=issued)


@require_http_methods(["GET", "POST"])
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation; POST revokes (the token stops working at once)."""
    token = get_object_or_404(RuntimeToken, pk=pk)
    if request.method == "GET":
        return render(request, REVOKE_TEMPLATE, {"token": token})
    try:
        runtime_token_revoke_service(name=token.name, actor=request.user)
    except TokenNotFound:  # rotated away between the confirmation and the POST
        messages.error(request, f"The token {token.name!r} no longer exists.")
        return redirect("accounts:tokens")
    messages.success(request, f"Revoked {token.name}: it stops working at once.")
    return redirect("accounts:tokens")
