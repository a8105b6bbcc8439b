"""Import (preview first, then apply) and export of the draft policy as YAML."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from engine.document.diagnostics import Severity
from engine.document.source import excerpt
from policy.domain.descriptor_write import ExportRefused
from policy.domain.descriptors import DescriptorError
from policy.domain.edits import as_sentence
from policy.domain.version_diff import WHOLE_FILE, fold, text_diff
from policy.domain.yaml_io import WEB_MAX_BYTES
from policy.exporting import (
    VersionMissing,
    descriptor_export,
    descriptor_response,
    draft_export_response,
)
from policy.importing import ImportPreview, import_preview
from policy.selectors import draft_state
from policy.services import StaleRevision, draft_replace
from policy.signals import draft_imported
from policy.versions import version_list
from policy.views.common import base_revision, page_url
from web.rendering import render_page

TOO_LARGE = (
    f"The text is too large: the web import takes at most {WEB_MAX_BYTES // (1024 * 1024)} MiB"
    f" ({WEB_MAX_BYTES} bytes). Nothing was changed. Larger files can be checked with"
    " `traitdeck validate FILE`."
)
NO_TEXT = "Paste the policy YAML or choose a file to upload."


class _TooLarge(Exception):
    pass


def _submitted_text(request: HttpRequest) -> str | bytes:
    """The YAML the form carries: an uploaded file wins over the text area.

    Raises ``_TooLarge`` over the web limit (also when Django refuses to read a huge body).
    """
    try:
        upload = request.FILES.get("file")
        text = request.POST.get("text", "")
    except RequestDataTooBig:
        raise _TooLarge from None
    if upload is not None and upload.size:
        if upload.size > WEB_MAX_BYTES:
            raise _TooLarge
        data: bytes = upload.read(WEB_MAX_BYTES + 1)
        return data
    # Browsers send a text area's line breaks as CRLF; the admin pasted LF (and the limit is
    # about the file, not about the form encoding).
    return text.replace("\r\n", "\n")


def preview_context(preview: ImportPreview, text: str | bytes) -> dict[str, Any]:
    diagnostics = preview.analysis.diagnostics
    diff = preview.diff
    return {
        "previewed": True,
        "refused": preview.refused,
        "too_large": preview.too_large,
        "diagnostics": diagnostics,
        "summary": preview.analysis.summary(),
        "errors": [d for d in diagnostics if d.severity is Severity.ERROR],
        "excerpts": _excerpts(diagnostics, text) if preview.refused else [],
        "diff_runs": fold(
            text_diff(
                preview.draft.text,
                preview.new_text or "",
                old_label=f"draft (revision {preview.draft.revision})",
                new_label="import",
                context=WHOLE_FILE,
            )
        ),
        "unchanged": not preview.refused and not diff,
        "base_revision": preview.draft.revision,
        # Carried back by the Apply form: what is applied is exactly what was previewed.
        # (Text that is not UTF-8 is refused, so "replace" never changes what gets applied.)
        "carried_text": _carried(text),
        "bundle": preview.bundle,
        "policy_bundles": preview.analysis.policy_bundles,
        "owned_at": ".".join(preview.analysis.bundle.owned_location)
        if preview.analysis.bundle
        else "",
    }


def _carried(text: str | bytes) -> str:
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else text


def page_words(exc: DescriptorError, *, writing: bool = False) -> str:
    """A descriptor refusal in the page's words: the pages offer a bundle picker, so they say
    "pick a bundle", never the CLI's ``--bundle`` (the CLI keeps its own sentence)."""
    listed = ", ".join(exc.policy_ids) or "none"
    if exc.kind == "ambiguous":
        if writing:
            return f"The descriptor has several bundles ({listed}): pick the one to write into."
        return f"Several bundles of the descriptor carry a policy ({listed}): pick a bundle."
    if exc.kind == "props-with-bundle":
        return "A bundle was picked, but the file is bundle props, not a bundles descriptor."
    return as_sentence(str(exc))


def _bundle_context(exc: DescriptorError, text: str | bytes, bundle: str | None) -> dict[str, Any]:
    return {
        "text": "" if isinstance(text, bytes) else text,
        "previewed": True,
        "refused": True,
        # Nothing wrong yet: a descriptor with several policies asks which one (no red).
        "bundle_prompt": exc.kind == "ambiguous" and bundle is None,
        "bundle_problem": page_words(exc),
        "policy_bundles": exc.policy_ids,
        "bundle": bundle,
        "carried_text": _carried(text),
        "diagnostics": [],
    }


def _excerpts(diagnostics: Any, text: str | bytes) -> list[tuple[Any, Any]]:
    """Each refusing diagnostic with a line, and the given text around that line."""
    source = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return [(d, excerpt(source, d.line)) for d in diagnostics if d.line is not None][:5]


def import_page(
    request: HttpRequest, context: dict[str, Any], *, status: int = 200, partial: bool = False
) -> HttpResponse:
    context = {"max_bytes": WEB_MAX_BYTES, "draft": draft_state(), **context}
    if partial:  # an htmx preview: only the preview box changes
        return render(request, "policy/import.html#preview", context, status=status)
    return render_page(request, "policy/import.html", context, status=status)


def import_view(request: HttpRequest) -> HttpResponse:
    """GET: the form. POST ``op=preview``: diagnostics and diff, nothing changes.
    POST ``op=apply``: replace the draft with the previewed text (409 when the draft moved)."""
    if request.method != "POST":
        return import_page(request, {})
    partial = bool(getattr(request, "htmx", False))
    try:
        text = _submitted_text(request)
    except _TooLarge:
        return import_page(
            request, {"previewed": True, "notice": TOO_LARGE}, status=413, partial=partial
        )
    if not text.strip():
        return import_page(
            request, {"previewed": True, "notice": NO_TEXT}, status=422, partial=partial
        )
    bundle = request.POST.get("bundle") or None
    try:
        preview = import_preview(text, max_bytes=WEB_MAX_BYTES, bundle=bundle)
    except DescriptorError as exc:
        # A KDCube bundles descriptor whose bundle must be picked: the preview offers them.
        return import_page(request, _bundle_context(exc, text, bundle), status=422, partial=partial)
    context = {"text": "" if isinstance(text, bytes) else text, **preview_context(preview, text)}
    if preview.too_large:
        return import_page(request, {**context, "notice": TOO_LARGE}, status=413, partial=partial)
    if preview.refused:
        return import_page(request, context, status=422, partial=partial)
    if request.POST.get("op") != "apply":
        return import_page(request, context, partial=partial)
    revision = base_revision(request)
    if revision is None:
        notice = "The form did not say which draft revision it previewed; preview it again."
        return import_page(request, {**context, "notice": notice}, status=422, partial=partial)
    try:
        state = draft_replace(data=preview.data, base_revision=revision, user=request.user)
    except StaleRevision as exc:
        # The preview above is already against the current draft: review it, then apply again.
        conflict = {
            "message": str(exc),
            "status": 409,
            "conflict": True,
            "reload_url": page_url(request),
        }
        return import_page(request, {**context, **conflict}, status=409, partial=partial)
    draft_imported.send(
        sender=import_view, carried=request.POST.get("kdcube_read", ""), text=_carried(text)
    )
    agents = len(state.agents)
    messages.success(
        request,
        f"Imported: the draft is now at revision {state.revision} with {agents} "
        f"agent{'' if agents == 1 else 's'}.",
    )
    return redirect("policy:agents")


def export_view(request: HttpRequest) -> HttpResponse:
    """The draft as a YAML download: the same bytes as the API export and ``traitdeck fmt``."""
    return draft_export_response()


def export_descriptor_view(request: HttpRequest) -> HttpResponse:
    """GET: the form. POST: the uploaded KDCube bundles descriptor, downloaded back with the
    draft (or a version) written into one bundle, only the policy's lines changed."""
    numbers = [version.number for version in version_list()]
    context: dict[str, Any] = {"versions": numbers, "max_bytes": WEB_MAX_BYTES}
    if request.method != "POST":
        return render_page(request, "policy/export_descriptor.html", context)
    bundle = (request.POST.get("bundle") or "").strip() or None
    version_raw = request.POST.get("version") or ""
    version = int(version_raw) if version_raw.isdigit() else None
    context.update({"bundle": bundle or "", "version": version})
    try:
        descriptor = _submitted_text(request)
    except _TooLarge:
        return render_page(
            request, "policy/export_descriptor.html", {**context, "problem": TOO_LARGE}, status=413
        )
    if not (descriptor.strip() if isinstance(descriptor, str) else descriptor.strip()):
        problem = "Choose your bundles descriptor (bundles.yaml) to upload."
        return render_page(
            request, "policy/export_descriptor.html", {**context, "problem": problem}, status=422
        )
    try:
        written = descriptor_export(descriptor, bundle=bundle, version=version)
    except DescriptorError as exc:
        context.update(
            {
                "problem": page_words(exc, writing=True),
                "prompt": exc.kind == "ambiguous" and bundle is None,
                "policy_bundles": exc.policy_ids,
                # The uploaded file stays with the form: picking a bundle needs no new upload.
                "carried_text": _carried(descriptor),
            }
        )
        status = 404 if exc.kind == "unknown" else 422
        return render_page(request, "policy/export_descriptor.html", context, status=status)
    except VersionMissing:
        problem = f"There is no version {version}."
        return render_page(
            request, "policy/export_descriptor.html", {**context, "problem": problem}, status=404
        )
    except ExportRefused as exc:
        context.update({"problem": as_sentence(str(exc)), "diagnostics": exc.diagnostics})
        return render_page(request, "policy/export_descriptor.html", context, status=422)
    return descriptor_response(written)
