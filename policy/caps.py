"""The web's caps on a policy's size, from the settings (``TRAITDECK_MAX_*``)."""

from __future__ import annotations

from django.conf import settings

from policy.domain.caps import AGENTS_COUNT, CONNECTIONS_COUNT, TOOLS_COUNT, Cap


def web_caps() -> tuple[Cap, ...]:
    """The caps every web import and edit (pages and API) is held to; management commands and
    the ``traitdeck`` CLI have none."""
    return (
        Cap(AGENTS_COUNT, settings.TRAITDECK_MAX_AGENTS, "TRAITDECK_MAX_AGENTS"),
        Cap(CONNECTIONS_COUNT, settings.TRAITDECK_MAX_CONNECTIONS, "TRAITDECK_MAX_CONNECTIONS"),
        Cap(TOOLS_COUNT, settings.TRAITDECK_MAX_TOOLS, "TRAITDECK_MAX_TOOLS"),
    )
