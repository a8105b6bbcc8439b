"""What every policy page shares: the draft revision an edit was based on, conflicts, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.http import reswap, retarget

from policy.selectors import DraftState
from policy.services import EditRefused, StaleRevision, draft_change

Edit = Callable[[dict[str, Any]], dict[str, Any]]


def base_revision(request: HttpRequest) -> int | None:
    """The ``base_revision`` an edit form carries (every edit form has one)."""
    raw = request.POST.get("base_revision", "")
    return int(raw) if raw.isascii() and raw.isdigit() else None  # "²".isdigit() is True


def problem(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    """A refusal shown in the page's ``#problem`` box (htmx) or as a small page (no JS)."""
    response = render(
        request,
        "policy/problem.html#problem",
        {"message": message, "status": status},
        status=status,
    )
    if getattr(request, "htmx", False):
        response = reswap(retarget(response, "#problem"), "outerHTML")
    return response


def apply_edit(
    request: HttpRequest,
    edit: Edit,
    on_success: Callable[[DraftState], HttpResponse],
) -> HttpResponse:
    """Run one edit through the draft service: 409 on a stale revision, 422 when refused.

    An edit form without ``base_revision`` is refused too: without it a stale form would
    silently overwrite someone else's change.
    """
    revision = base_revision(request)
    if revision is None:
        return problem(request, "The form did not say which draft revision it edits.", status=422)
    try:
        state = draft_change(edit=edit, base_revision=revision, user=request.user)
    except StaleRevision as exc:
        return problem(request, str(exc), status=409)
    except EditRefused as exc:
        return problem(request, str(exc), status=422)
    return on_success(state)
