"""Django system checks of discovery's settings (``python manage.py check``, also at
``runserver``/``migrate``): settings that cannot be read are reported before the first discovery
refuses with them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from discovery.mcp_list import parse_commands, parse_credentials, parse_hosts

_PARSERS = (
    ("TRAITDECK_MCP_STDIO_COMMANDS", parse_commands),
    ("TRAITDECK_MCP_HTTP_HOSTS", parse_hosts),
    ("TRAITDECK_MCP_CREDENTIALS", parse_credentials),
)


@checks.register(checks.Tags.security)
def discovery_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for index, (name, parse) in enumerate(_PARSERS, start=1):
        try:
            parse(getattr(settings, name, ""))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            errors.append(checks.Error(f"{name} cannot be read: {exc}", id=f"traitdeck.E00{index}"))
    return errors
