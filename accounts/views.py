from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.selectors import runtime_token_list


def overview(request: HttpRequest) -> HttpResponse:
    """The first page after login: what exists in this instance right now."""
    return render(request, "accounts/overview.html", {"tokens": runtime_token_list()})
