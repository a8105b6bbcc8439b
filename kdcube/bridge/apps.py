from __future__ import annotations

from django.apps import AppConfig


class BridgeConfig(AppConfig):
    name = "kdcube.bridge"
    #: The label it had as a top-level app: its table (``bridge_bridgestatus``), migrations and
    #: template tag library keep their names.
    label = "bridge"
    default_auto_field = "django.db.models.BigAutoField"
