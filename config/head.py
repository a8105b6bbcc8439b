"""HEAD answered as GET without a body, on every route.

Django's ``require_GET`` views and ninja's GET operations answer 405 to HEAD, and under daphne
a HEAD response that carries a body sends it after the headers (daphne does not strip it): on a
keep-alive connection the client reads those bytes as the start of the next response. Here a HEAD
request runs as the GET it asks about (same access rules, same headers, same status) and the body
is dropped, ``Content-Length`` kept as GET's would be (RFC 9110 §9.3.2).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse


class HeadAsGetMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method != "HEAD":
            return self.get_response(request)
        request.method = "GET"
        try:
            response = self.get_response(request)
        finally:
            request.method = "HEAD"
        if isinstance(response, StreamingHttpResponse):
            response.close()  # its generator never runs: nothing is read for a body nobody gets
            response.streaming_content = []
        elif isinstance(response, HttpResponse):
            if not response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
            response.content = b""
        return response
