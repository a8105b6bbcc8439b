"""What every policy page shares: the draft revision an edit was based on, conflicts, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import yaml
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import reswap, retarget

from engine.document.jsonable import jsonable
from policy.audit_notes import AuditNote
from policy.selectors import DraftState, draft_state
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


def problem(
    request: HttpRequest,
    message: str,
    *,
    status: int,
    conflict: dict[str, Any] | None = None,
) -> HttpResponse:
    """A refusal shown in the page's ``#problem`` box (htmx) or as a small page (no JS);
    ``conflict`` (a 409) adds what the draft holds now beside the user's unsaved input."""
    response = render(
        request,
        "policy/problem.html#problem",
        {
            "message": message,
            "status": status,
            "reload_url": page_url(request),
            "conflict": conflict,
        },
        status=status,
    )
    if getattr(request, "htmx", False):
        response = reswap(retarget(response, "#problem"), "outerHTML")
    return response


def as_text(value: Any) -> str:
    """A part of the policy as the admin reads it (YAML), for the conflict view."""
    if value is None:
        return "(not in the draft any more)"
    return yaml.safe_dump(jsonable(value), sort_keys=False, allow_unicode=True).strip()


def submitted_input(request: HttpRequest) -> str:
    """What the user sent with the form (not the token or the revision), for the conflict view."""
    skip = {"csrfmiddlewaretoken", "base_revision"}
    lines = [
        f"{name}: {value}"
        for name in request.POST
        if name not in skip
        for value in request.POST.getlist(name)
        if value != ""
    ]
    lines += [
        f"{name}: (file {upload.name}, {upload.size} bytes)"
        for name in request.FILES
        for upload in request.FILES.getlist(name)
    ]
    return "\n".join(lines) or "(nothing)"


def conflict_context(
    exc: StaleRevision, *, current: Any, yours: str, what: str = ""
) -> dict[str, Any]:
    """The conflict view's content: the refusal, the current value of what was being edited
    (``current``, from the draft as it is now) and the user's unsaved input (``yours``)."""
    return {
        "message": str(exc),
        "revision": exc.current,
        "base": exc.base,
        "what": what,
        "current": as_text(current),
        "yours": yours,
    }


#: From the draft as it is now to the value of the thing being edited (for the conflict view).
Current = Callable[[DraftState], Any]


def apply_change(
    request: HttpRequest,
    change: Callable[[int], DraftState],
    on_success: Callable[[DraftState], HttpResponse],
    *,
    current: Current | None = None,
    what: str = "",
    on_conflict: Callable[[StaleRevision], HttpResponse] | None = None,
) -> HttpResponse:
    """Run one draft service, given the form's ``base_revision``: 409 on a stale revision, 422
    when refused.

    An edit form without ``base_revision`` is refused too: without it a stale form would
    silently overwrite someone else's change. On a 409, ``on_conflict`` answers (an editor
    shows its form again with the user's input), else the problem box shows ``current`` (the
    value of ``what`` in the draft now) beside the user's input: neither is lost.
    """
    revision = base_revision(request)
    if revision is None:
        return problem(request, "The form did not say which draft revision it edits.", status=422)
    try:
        state = change(revision)
    except StaleRevision as exc:
        if on_conflict is not None:
            return on_conflict(exc)
        now = current(draft_state()) if current is not None else None
        context = conflict_context(exc, current=now, yours=submitted_input(request), what=what)
        if current is None:
            context["current"] = ""
        return problem(request, str(exc), status=409, conflict=context)
    except EditRefused as exc:
        return problem(request, str(exc), status=422)
    return on_success(state)


def apply_edit(
    request: HttpRequest,
    edit: Edit,
    on_success: Callable[[DraftState], HttpResponse],
    *,
    audit: AuditNote | None = None,
    current: Current | None = None,
    what: str = "",
    on_conflict: Callable[[StaleRevision], HttpResponse] | None = None,
) -> HttpResponse:
    """:func:`apply_change` for one edit of the draft document (``audit``: what it records)."""
    return apply_change(
        request,
        lambda revision: draft_change(
            edit=edit, base_revision=revision, user=request.user, audit=audit
        ),
        on_success,
        current=current,
        what=what,
        on_conflict=on_conflict,
    )
