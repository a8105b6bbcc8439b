from __future__ import annotations

from django.apps import AppConfig


class KDCubeConfig(AppConfig):
    name = "kdcube"

    def ready(self) -> None:
        from kdcube import receivers  # noqa: F401 (listens to policy's publish and import)
