"""The ``policy:`` namespace: the policy app's own URLs plus the pages that replay recorded rounds
under policy sides (``pages.impact``), which the policy app cannot route to itself."""

from __future__ import annotations

from django.urls import path

from pages import impact
from policy import urls as policy_urls

app_name = "policy"

urlpatterns = [
    path("impact/", impact.impact_view, name="impact"),
    path(
        "impact/rounds/<str:agent>/<path:turn_id>/<int:iteration>/",
        impact.impact_round_view,
        name="impact-round",
    ),
    path("publish/", impact.publish_view, name="publish"),
    *policy_urls.urlpatterns,
]
