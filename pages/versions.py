"""Versions in the browser: history, one version, diff, and resetting the draft to a version.
(Publishing, rollback and impact replay observe's rounds: they live in ``pages.impact_pages``.)"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from core.numbers import parse_whole
from policy.domain.version_diff import WHOLE_FILE, fold, tool_changes, unified_diff
from policy.selectors import draft_state
from policy.services import StaleRevision
from policy.versions import (
    PublishRefused,
    draft_reset,
    version_data,
    version_get,
    version_list,
    version_published,
)
from policy.views.common import base_revision


def diff_context(old_name: str, new_name: str) -> dict[str, Any]:
    old_label, old = _side(old_name)
    new_label, new = _side(new_name)
    lines = unified_diff(old, new, old_label=old_label, new_label=new_label, context=WHOLE_FILE)
    return {
        "from_label": old_label,
        "to_label": new_label,
        "from_name": old_name,
        "to_name": new_name,
        "tools": tool_changes(old, new),
        "lines": lines,
        "runs": fold(lines),
    }


def _side(name: str) -> tuple[str, Any]:
    if name == "draft":
        state = draft_state()
        return f"draft (revision {state.revision})", state.data
    if name == "empty":
        return "nothing", {"surfaces": {"as_consumer": {"agents": {}}}}
    if name == "published":
        published = version_published()
        if published is None:
            return "nothing published", {"surfaces": {"as_consumer": {"agents": {}}}}
        return f"version {published.number}", version_data(published)
    number = parse_whole(name)
    if number is not None:
        found = version_get(number)
        if found is not None:
            return f"version {found.number}", version_data(found)
    raise Http404(f"There is no version {name!r}.")


def versions_view(request: HttpRequest) -> HttpResponse:
    """Every published version, newest (in force) first."""
    rows = version_list()
    return render(
        request,
        "policy/versions.html",
        {"versions": rows, "in_force": rows[0].number if rows else None},
    )


def version_view(request: HttpRequest, number: int) -> HttpResponse:
    """One version: who, when, why, what changed from the one before, and rollback."""
    found = version_get(number)
    if found is None:
        raise Http404(f"There is no version {number}.")
    published = version_published()
    previous = version_get(number - 1)
    context: dict[str, Any] = {
        "version": found,
        "in_force": published is not None and published.number == found.number,
        "previous": previous,
        **diff_context(str(previous.number) if previous else "empty", str(number)),
    }
    return render(request, "policy/version.html", context)


def diff_view(request: HttpRequest) -> HttpResponse:
    """Any two sides: ``?from=`` and ``?to=`` take ``draft``, ``published`` or a number."""
    old = request.GET.get("from", "published")
    new = request.GET.get("to", "draft")
    return render(
        request,
        "policy/diff.html",
        {**diff_context(old, new), "versions": version_list()},
    )


def _reset_draft(request: HttpRequest, number: int | None) -> HttpResponse:
    """POST only: set the draft to the version in force (``number`` None) or to version
    ``number``; then the agents page, saying what happened (a refusal as a message too)."""
    if request.method != "POST":
        return redirect("policy:agents")
    try:
        state = draft_reset(actor=request.user, base_revision=base_revision(request), number=number)
    except (PublishRefused, StaleRevision) as exc:
        messages.error(request, str(exc))
    else:
        what = "the version in force" if number is None else f"version {number}"
        messages.success(
            request,
            f"The draft is now {what} (revision {state.revision}); the audit log keeps the"
            " draft it replaced.",
        )
    return redirect("policy:agents")


def draft_discard_view(request: HttpRequest) -> HttpResponse:
    return _reset_draft(request, None)


def edit_from_version_view(request: HttpRequest, number: int) -> HttpResponse:
    return _reset_draft(request, number)
