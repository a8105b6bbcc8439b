from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from accounts import views as account_views
from config.api import api

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
        RedirectView.as_view(url=static("favicon.svg"), permanent=True),
        name="favicon",
    ),
]
