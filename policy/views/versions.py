"""Versions in the browser: history, one version, diff, rollback (publishing shows the impact on
recorded rounds, so its page lives in ``pages.impact``)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from policy.domain.version_diff import tool_changes, unified_diff
from policy.selectors import draft_state
from policy.versions import (
    ConfirmationNeeded,
    PublishRefused,
    policy_rollback,
    version_data,
    version_get,
    version_list,
    version_published,
)


def diff_context(old_name: str, new_name: str) -> dict[str, Any]:
    old_label, old = _side(old_name)
    new_label, new = _side(new_name)
    return {
        "from_label": old_label,
        "to_label": new_label,
        "from_name": old_name,
        "to_name": new_name,
        "tools": tool_changes(old, new),
        "lines": unified_diff(old, new, old_label=old_label, new_label=new_label),
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
    if name.isascii() and name.isdigit():
        found = version_get(int(name))
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


def rollback_view(request: HttpRequest, number: int) -> HttpResponse:
    """POST only: publish a copy of version ``number`` (confirmations asked on the page)."""
    if request.method != "POST":
        return redirect("policy:version", number=number)
    found = version_get(number)
    if found is None:
        raise Http404(f"There is no version {number}.")
    try:
        created = policy_rollback(
            actor=request.user,
            number=number,
            message=request.POST.get("message", ""),
            confirm_errors=request.POST.get("confirm_errors") == "on",
            confirm_unpublished=request.POST.get("confirm_unpublished") == "on",
        )
    except (ConfirmationNeeded, PublishRefused) as exc:
        published = version_published()
        previous = version_get(number - 1)
        context = {
            "version": found,
            "in_force": published is not None and published.number == found.number,
            "previous": previous,
            "rollback_refusal": str(exc),
            "rollback_confirm": isinstance(exc, ConfirmationNeeded),
            "rollback_message": request.POST.get("message", ""),
            "confirm_errors": request.POST.get("confirm_errors") == "on"
            or (isinstance(exc, ConfirmationNeeded) and "error" in str(exc)),
            "confirm_unpublished": request.POST.get("confirm_unpublished") == "on"
            or (isinstance(exc, ConfirmationNeeded) and "never published" in str(exc)),
            **diff_context(str(previous.number) if previous else "empty", str(number)),
        }
        return render(request, "policy/version.html", context, status=422)
    messages.success(
        request,
        f"Rolled back: version {created.number} is a copy of version {number} and is in force; "
        "the draft is set to it.",
    )
    return redirect("policy:version", number=created.number)
