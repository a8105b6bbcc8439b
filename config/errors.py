"""Error views Django calls itself, outside any view: a request it refuses before routing (an
invalid ``Host`` header, a suspicious operation) answers 400 — as JSON under ``/api/``, where
every client reads ``{"error": …}``, and as the site's page elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    # Never ``request.get_host()`` here: an invalid Host header is what brought us here.
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": "Bad request: the server refused its headers (for example its Host)."},
            status=400,
        )
    return defaults.bad_request(request, exception or Exception())
