from __future__ import annotations

from django.urls import path

from pages import audit_log as views

app_name = "audit"

urlpatterns = [
    path("", views.audit_log, name="log"),
    path("export.csv", views.audit_export_csv, name="export-csv"),
]
