from __future__ import annotations

from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "policy"

    def ready(self) -> None:
        from policy import checks  # noqa: F401 (registers the system checks)
