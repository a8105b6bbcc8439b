from __future__ import annotations

from django.urls import path

from audit import views

app_name = "audit"

urlpatterns = [
    path("", views.audit_log, name="log"),
    path("export.csv", views.audit_export_csv, name="export-csv"),
]
