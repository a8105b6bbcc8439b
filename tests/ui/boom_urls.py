"""The real URLs plus one page that fails, to see the 500 page a visitor gets."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import urlpatterns as real_urlpatterns


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret detail that must not reach a visitor")


# Named like the overview so the access table lets a viewer in (a route it does not name is
# refused before the view runs).
urlpatterns = [path("boom/", boom, name="overview"), *real_urlpatterns]
