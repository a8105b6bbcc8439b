"""Django system checks of the policy app's settings (``python manage.py check``, also at
``runserver``/``migrate``; ``--deploy`` adds the deployment ones): an unknown react version is
said. Discovery's settings are checked by ``discovery.checks``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from engine.round.react_version import read_react_version


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
