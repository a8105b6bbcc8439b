"""Rendering a page the way every app's views do (htmx aware).

Every page template has a ``page`` partial: the content of ``<main id="main">``. A full request
gets the whole page; an htmx navigation (a link with ``hx-get``) gets only ``page``, with the
page's title in front; a saved edit answers with the ``page`` of where the admin lands, retargeted
to ``#main`` with the URL pushed (without JavaScript: a redirect).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template import Context
from django.template.loader import get_template
from django.template.loader_tags import BlockNode
from django.utils.cache import patch_vary_headers
from django.utils.html import format_html
from django_htmx.http import push_url, reswap, retarget
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (typed for mypy)."""

    htmx: HtmxDetails


def htmx_details(request: HttpRequest) -> HtmxDetails | None:
    """django-htmx's view of an htmx request, or ``None`` (works on a plain ``HttpRequest``)."""
    details = getattr(request, "htmx", None)
    return details if isinstance(details, HtmxDetails) and details else None


def is_htmx(request: HttpRequest) -> bool:
    return htmx_details(request) is not None


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """The whole page, or (htmx navigation) only its ``page`` partial for ``#main``."""
    # A history restore (back button after the cache is gone) needs the whole page.
    details = htmx_details(request)
    partial = details is not None and not details.history_restore_request
    response = render(request, f"{template}#page" if partial else template, context, status=status)
    if partial:
        with_title(request, response, template, context)
    patch_vary_headers(response, ("HX-Request",))
    return response


def with_title(
    request: HttpRequest, response: HttpResponse, template: str, context: dict[str, Any]
) -> HttpResponse:
    """htmx sets the tab's title from a <title> in what it swaps in; a ``#page`` partial has
    none, so the template's own title goes in front of it."""
    title = format_html("<title>{} · Traitdeck</title>", page_title(request, template, context))
    response.content = title.encode() + response.content
    return response


def page_title(request: HttpRequest, template: str, context: dict[str, Any]) -> str:
    """The template's ``{% block title %}``, rendered with ``context`` (empty when it has none)."""
    compiled = get_template(template).template  # type: ignore[attr-defined]
    for block in compiled.nodelist.get_nodes_by_type(BlockNode):
        if block.name == "title":
            # A plain Context: a title names the page's own values, never a context processor's.
            return str(block.nodelist.render(Context({**context, "request": request}))).strip()
    return ""


def show_after_edit(
    request: HttpRequest, template: str, context: dict[str, Any], url: str
) -> HttpResponse:
    """Where a saved edit lands: htmx swaps that page into ``#main``; without JS, a redirect."""
    if not is_htmx(request):
        return redirect(url)
    response = with_title(request, render(request, f"{template}#page", context), template, context)
    return push_url(reswap(retarget(response, "#main"), "innerHTML"), url)
