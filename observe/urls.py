from __future__ import annotations

from django.urls import path

import web.converters  # noqa: F401  (registers <id:…>, for stored identifiers)
from observe import views, views_health

app_name = "observe"

urlpatterns = [
    path("", views.live, name="live"),
    path("history/", views.history, name="history"),
    path("tools/", views_health.tools, name="tools"),
    path("tools/<id:agent>/<id:tool_id>/", views_health.tool, name="tool"),
    # A turn_id may contain "/": the path converter takes everything up to the last segment,
    # which is always the iteration (DESIGN §4).
    path("rounds/<id:agent>/<path:turn_id>/<int:iteration>/", views.round_page, name="round"),
    # The same page for ids no path can hold (observe.selectors.round_url): ?agent=&turn_id=&…
    path("rounds/", views.round_by_ids, name="round-by-ids"),
]
