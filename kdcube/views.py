"""KDCube in the browser: push a version (retry, overwrite), import the bundle's props."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from kdcube.client import KDCubeError
from kdcube.services import KDCubeOff, carry_read, inert_diagnostics, kdcube_pull, kdcube_push
from policy.importing import import_preview
from policy.views.transfer import import_page, preview_context


def kdcube_push_view(request: HttpRequest, number: int) -> HttpResponse:
    """POST only: push version ``number`` (the answer shows on the version page)."""
    if request.method != "POST":
        return redirect("policy:version", number=number)
    try:
        row = kdcube_push(
            actor=request.user, number=number, overwrite=request.POST.get("overwrite") == "on"
        )
    except KDCubeOff as exc:
        raise Http404(str(exc)) from None
    except LookupError as exc:
        raise Http404(str(exc)) from None
    if row.status == "pushed":
        messages.success(request, f"Pushed version {number} to {row.target}.")
    else:
        messages.error(request, f"Version {number} was not pushed ({row.status}): {row.answer}")
    return redirect("policy:version", number=number)


def kdcube_import_view(request: HttpRequest) -> HttpResponse:
    """Read the KDCube bundle's policy and preview it against the draft, as every import is
    previewed; the page's Apply button posts to the import page, which applies exactly it and
    takes the read in as the push guard's baseline. The preview itself stores nothing."""
    try:
        pulled = kdcube_pull()
    except KDCubeOff as exc:
        raise Http404(str(exc)) from None
    except KDCubeError as exc:
        return import_page(request, {"previewed": True, "notice": str(exc)}, status=502)
    preview = import_preview(pulled.text)
    context = {
        "text": pulled.text,
        **preview_context(preview, pulled.text),
        "from_kdcube": True,
        "kdcube_secrets": pulled.secrets,
        "kdcube_inert": inert_diagnostics(pulled.inert),
        # Apply carries the read: only applying the import makes it the baseline.
        "kdcube_read": carry_read(pulled.read, pulled.text),
    }
    return import_page(request, context, status=422 if preview.refused else 200)
