"""The KDCube app's pages, in the ``policy:`` namespace (``pages.policy_urls`` routes them): push
a version to the bundle, preview the bundle's policy for import."""

from __future__ import annotations

from django.urls import path

from kdcube import views as kdcube

urlpatterns = [
    path("versions/<int:number>/push/", kdcube.kdcube_push_view, name="kdcube-push"),
    path("kdcube/import/", kdcube.kdcube_import_view, name="kdcube-import"),
]
