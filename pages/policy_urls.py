"""The ``policy:`` namespace: the policy app's own URLs plus the pages that replay recorded rounds
under policy sides (``pages.impact_pages``), which the policy app cannot route to itself."""

from __future__ import annotations

from django.urls import path

from pages import impact_pages
from policy import urls as policy_urls

app_name = "policy"

urlpatterns = [
    path("impact/", impact_pages.impact_view, name="impact"),
    path(
        "impact/rounds/<str:agent>/<path:turn_id>/<int:iteration>/",
        impact_pages.impact_round_view,
        name="impact-round",
    ),
    # The same page for ids no path can hold (``?agent=&turn_id=&iteration=``).
    path("impact/rounds/", impact_pages.impact_round_by_ids, name="impact-round-by-ids"),
    path("publish/", impact_pages.publish_view, name="publish"),
    path("versions/<int:number>/rollback/", impact_pages.rollback_view, name="rollback"),
    *policy_urls.urlpatterns,
]
