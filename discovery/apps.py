from __future__ import annotations

from django.apps import AppConfig


class DiscoveryConfig(AppConfig):
    name = "discovery"

    def ready(self) -> None:
        from discovery import checks  # noqa: F401 (registers the system checks)
        from discovery.selectors import discovery_panel
        from policy.views.connections import CONNECTION_PANELS

        CONNECTION_PANELS["discovery"] = discovery_panel
