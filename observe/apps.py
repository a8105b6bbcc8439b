from __future__ import annotations

from django.apps import AppConfig


class ObserveConfig(AppConfig):
    name = "observe"
