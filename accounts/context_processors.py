"""What templates may show the logged-in user: ``can.edit`` / ``can.publish`` hide controls the
role check would refuse anyway (the check itself stays in ``accounts.middleware``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.access import EDITOR, PUBLISHER, VIEWER
from accounts.roles import has_role, user_role


def role(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"can": {"view": False, "edit": False, "publish": False}, "role": None}
    return {
        "role": user_role(user),
        "can": {
            "view": has_role(user, VIEWER),
            "edit": has_role(user, EDITOR),
            "publish": has_role(user, PUBLISHER),
        },
    }
