"""Django system checks of the policy app's settings (``python manage.py check``, also at
``runserver``/``migrate``; ``--deploy`` adds the deployment ones): discovery settings that cannot
be read are reported before the first discovery refuses with them; an unknown react version is
said."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from engine.round.react_version import read_react_version
from policy.discovery.mcp_list import parse_commands, parse_credentials, parse_hosts

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


@checks.register(checks.Tags.compatibility, deploy=True)
def react_version_setting(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An unknown ``TRAITDECK_REACT_AGENT_VERSION`` is read as ``v2`` (as the runtime reads its
    ``AI_REACT_AGENT_VERSION``): say so, since every prediction then assumes v2."""
    raw = getattr(settings, "TRAITDECK_REACT_AGENT_VERSION", None)
    version, known = read_react_version(raw)
    if known:
        return []
    return [
        checks.Warning(
            f"TRAITDECK_REACT_AGENT_VERSION={raw!r} is neither v2 nor v3: predictions assume "
            f"{version}, as the runtime reads an unknown AI_REACT_AGENT_VERSION.",
            hint="Set it to the runtime's AI_REACT_AGENT_VERSION: v2 (KDCube's default) or v3.",
            id="traitdeck.W001",
        )
    ]
