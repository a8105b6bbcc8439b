"""The audit log page and its CSV export (the same filter as ``GET /api/v1/audit``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseBase,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from audit.selectors import (
    audit_actions,
    audit_actor_names,
    audit_entries,
    csv_lines,
    parse_filter,
)
from pages.audit_presenting import entry_views

PAGE_SIZE = 50
LOG_TEMPLATE = "audit/log.html"


def _query(raw: dict[str, str], **extra: str) -> str:
    kept = {key: value for key, value in {**raw, **extra}.items() if value}
    return "?" + urlencode(kept) if kept else ""


@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    """Newest first, 50 a page; a filter value that cannot be read is named and ignored."""
    parsed = parse_filter(request.GET, now=timezone.now())
    page = Paginator(audit_entries(parsed.audit_filter), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    context = {
        "filter": parsed.raw,
        "errors": parsed.errors,
        "page": page,
        "entries": entry_views(page.object_list),
        "actors": audit_actor_names(),
        "actions": audit_actions(),
        "csv_url": reverse("audit:export-csv") + _query(parsed.raw),
        "newer_url": _query(parsed.raw, page=str(page.previous_page_number()))
        if page.has_previous()
        else None,
        "older_url": _query(parsed.raw, page=str(page.next_page_number()))
        if page.has_next()
        else None,
        "time_zone": timezone.get_current_timezone_name(),
    }
    # The filter form asks htmx for the results only; a plain GET (or htmx restoring history
    # after its cache is gone) gets the whole page.
    htmx: Any = getattr(request, "htmx", None)
    partial = bool(htmx) and not htmx.history_restore_request
    response = render(request, f"{LOG_TEMPLATE}#results" if partial else LOG_TEMPLATE, context)
    patch_vary_headers(response, ("HX-Request",))
    return response


@require_GET
def audit_export_csv(request: HttpRequest) -> HttpResponseBase:
    """Every entry the filter matches (not only one page), as CSV. A filter value that cannot
    be read is refused (400): an export silently widened to everything would mislead."""
    parsed = parse_filter(request.GET, now=timezone.now())
    if parsed.errors:
        return HttpResponseBadRequest(
            " ".join(parsed.errors) + "\n", content_type="text/plain; charset=utf-8"
        )
    entries = audit_entries(parsed.audit_filter).iterator(chunk_size=500)
    response = StreamingHttpResponse(csv_lines(entries), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="traitdeck-audit-{stamp}.csv"'
    return response
