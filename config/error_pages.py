"""Traitdeck's own 404 and 500 pages with ``DEBUG`` on too (the demo runs with it on).

With ``DEBUG`` off Django already renders ``templates/404.html`` and ``500.html``; with it on it
shows its technical pages (URL patterns, settings, tracebacks), which a visitor of the demo must
not see. This middleware renders the same pages through the same default views in both modes;
the traceback of a 500 still goes to the server log. API paths keep their JSON errors, also
for a path no API route matches (Django's own 404 there would be an HTML page).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views.defaults import page_not_found, server_error

from policy.selectors import AgentNotFound

logger = logging.getLogger("django.request")


def _ours(request: HttpRequest) -> bool:
    return bool(settings.DEBUG) and not request.path.startswith("/api/")


def _resolves(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


def _no_api_route(request: HttpRequest) -> HttpResponse | None:
    """A JSON 404 for an ``/api/`` path no route matches (e.g. a path parameter holding a line
    break, which ninja's patterns do not match), unless adding a slash would (CommonMiddleware
    redirects then)."""
    path = request.path_info
    if not path.startswith("/api/") or _resolves(path) or _resolves(f"{path}/"):
        return None
    shown = path if len(path) <= 100 else f"{path[:97]}..."
    return JsonResponse({"error": f"There is no API route {shown!r}."}, status=404)


class ErrorPagesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        not_found = _no_api_route(request)
        if not_found is not None:
            return not_found
        if _ours(request):
            try:
                resolve(request.path_info)
            except Resolver404 as exc:
                return page_not_found(request, exc)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, AgentNotFound) and not request.path.startswith("/api/"):
            # The one place a page's "no such agent" becomes its 404 (the API's is config.api).
            return page_not_found(request, Http404(str(exception)))
        if not _ours(request):
            return None
        if isinstance(exception, Http404):
            return page_not_found(request, exception)
        if isinstance(exception, Exception) and type(exception).__module__.startswith(
            "django.core.exceptions"
        ):
            return None  # PermissionDenied, BadRequest…: Django's own handlers (403.html, 400)
        logger.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"request": request},
        )
        return server_error(request)
