"""The ``policy:`` namespace: the policy app's own URLs, discovery's and kdcube's, plus the pages
that compose them: the impact and publish pages (``pages.impact_pages``: policy sides replayed
over recorded rounds) and the version pages (``pages.versions``: each version with its KDCube
push)."""

from __future__ import annotations

from django.urls import path

from discovery import urls as discovery_urls
from kdcube import urls as kdcube_urls
from pages import impact_pages, versions
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
    path("versions/", versions.versions_view, name="versions"),
    path("versions/<int:number>/", versions.version_view, name="version"),
    path("draft/discard/", versions.draft_discard_view, name="draft-discard"),
    path("versions/<int:number>/edit/", versions.edit_from_version_view, name="edit-from-version"),
    path("diff/", versions.diff_view, name="diff"),
    *policy_urls.urlpatterns,
    *discovery_urls.urlpatterns,
    *kdcube_urls.urlpatterns,
]
