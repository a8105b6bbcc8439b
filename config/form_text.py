"""A page that cannot be encoded because it shows the user's input again answers 422, not 500.

Django decodes a form body with ``errors="replace"``, so over HTTP a field never holds a lone
UTF-16 surrogate; a request built another way (a test client, a future decoder) could. The
services refuse such text before anything is stored (``policy.services``), but a refused form
shows its fields again, and a page holding a lone surrogate cannot be encoded. This middleware
(the innermost, so it sees the view's exception first) turns that failure into the refusal it is.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render

from core.text import encodable

MESSAGE = (
    "A field holds text that cannot be encoded as UTF-8 (a lone surrogate), so nothing was"
    " saved; send the form again without it."
)


def _lone_surrogate(exception: BaseException) -> bool:
    # The text the encoder failed on: unencodable as UTF-8 means it holds a lone surrogate.
    return isinstance(exception, UnicodeEncodeError) and not encodable(str(exception.object))


class FormTextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _lone_surrogate(exception):
            return None
        if request.path.startswith("/api/"):
            return JsonResponse({"error": MESSAGE}, status=422)
        return render(request, "422.html", {"message": MESSAGE, "back": request.path}, status=422)
