from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from accounts import views as account_views
from config.api import api


class FaviconRedirect(RedirectView):
    """The SVG icon's static URL, looked up per request: with the manifest storage (``DEBUG``
    off) it exists only after ``collectstatic``, which must not be needed to import the URLs."""

    permanent = True

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return static("favicon.svg")


urlpatterns = [
    path("", account_views.overview, name="overview"),
    path("accounts/no-role/", account_views.no_role, name="no-role"),
    path("accounts/", include("accounts.auth_urls")),
    path("admin/", admin.site.urls),
    path("policy/", include("policy.urls")),
    path("live/", include("observe.urls")),
    path("audit/", include("audit.urls")),
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
