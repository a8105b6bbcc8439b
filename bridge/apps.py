from __future__ import annotations

from django.apps import AppConfig


class BridgeConfig(AppConfig):
    name = "bridge"
    default_auto_field = "django.db.models.BigAutoField"
