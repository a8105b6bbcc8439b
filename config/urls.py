from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from accounts import views_no_role
from config.api import api
from pages import overview


class FaviconRedirect(RedirectView):
    """The SVG icon's static URL, looked up per request: with the manifest storage (``DEBUG``
    off) it exists only after ``collectstatic``, which must not be needed to import the URLs."""

    permanent = True

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return static("favicon.svg")


urlpatterns = [
    path("", overview.overview, name="overview"),
    path("accounts/no-role/", views_no_role.no_role, name="no-role"),
    path("accounts/", include("accounts.auth_urls")),
    path("admin/", admin.site.urls),
    path("policy/", include("pages.policy_urls")),
    path("live/", include("observe.urls")),
    # The menu's History and Tools live under /live/; the addresses a user types lead there.
    path(
        "history/",
        RedirectView.as_view(pattern_name="observe:history", query_string=True),
        name="history-shortcut",
    ),
    path(
        "tools/",
        RedirectView.as_view(pattern_name="observe:tools", query_string=True),
        name="tools-shortcut",
    ),
    path("audit/", include("pages.audit_urls")),
    path("tokens/", include("accounts.urls")),
    path("api/", api.urls),
    # Browsers and feed readers ask for /favicon.ico whatever the page links: send them the SVG.
    path(
        "favicon.ico",
        FaviconRedirect.as_view(),
        name="favicon",
    ),
]

handler400 = "config.errors.bad_request"
