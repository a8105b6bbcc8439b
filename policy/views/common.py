"""What every policy page shares: the draft revision an edit was based on, conflicts, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import reswap, retarget

from policy.selectors import DraftState
from policy.services import EditRefused, StaleRevision, draft_change

Edit = Callable[[dict[str, Any]], dict[str, Any]]


def base_revision(request: HttpRequest) -> int | None:
    """The ``base_revision`` an edit form carries (every edit form has one)."""
    raw = request.POST.get("base_revision", "")
    return int(raw) if raw.isascii() and raw.isdigit() else None  # "²".isdigit() is True


def page_url(request: HttpRequest) -> str:
    """The page the user is looking at (where "Reload" should go), never the POST-only URL an
    edit was sent to: htmx names it in ``HX-Current-URL``, a plain form in ``Referer``."""
    htmx = getattr(request, "htmx", None)
    candidate = (htmx.current_url if htmx else None) or request.headers.get("Referer") or ""
    parts = urlsplit(candidate)
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return reverse("policy:agents")


def problem(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    """A refusal shown in the page's ``#problem`` box (htmx) or as a small page (no JS)."""
    response = render(
        request,
        "policy/problem.html#problem",
        {"message": message, "status": status, "reload_url": page_url(request)},
        status=status,
    )
    if getattr(request, "htmx", False):
        response = reswap(retarget(response, "#problem"), "outerHTML")
    return response


def apply_change(
    request: HttpRequest,
    change: Callable[[int], DraftState],
    on_success: Callable[[DraftState], HttpResponse],
) -> HttpResponse:
    """Run one draft service, given the form's ``base_revision``: 409 on a stale revision, 422
    when refused.

    An edit form without ``base_revision`` is refused too: without it a stale form would
    silently overwrite someone else's change.
    """
    revision = base_revision(request)
    if revision is None:
        return problem(request, "The form did not say which draft revision it edits.", status=422)
    try:
        state = change(revision)
    except StaleRevision as exc:
        return problem(request, str(exc), status=409)
    except EditRefused as exc:
        return problem(request, str(exc), status=422)
    return on_success(state)


def apply_edit(
    request: HttpRequest,
    edit: Edit,
    on_success: Callable[[DraftState], HttpResponse],
) -> HttpResponse:
    """:func:`apply_change` for one edit of the draft document."""
    return apply_change(
        request,
        lambda revision: draft_change(edit=edit, base_revision=revision, user=request.user),
        on_success,
    )
