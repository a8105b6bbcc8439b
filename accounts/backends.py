"""How a username and password become a user: Django's model backend, and the demo account.

The demo account (``make demo``'s superuser ``demo`` / ``demo-traitdeck``) exists for demo mode
only. Its password is public, so outside demo mode (``TRAITDECK_DEMO`` off) it can neither log
in nor keep a session it opened in demo mode, whatever the database holds: the check sits where
Django asks "may this user authenticate?" for both a login and every request of a session.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend

#: The demo account's username: reserved, it logs in only with ``TRAITDECK_DEMO=1``.
DEMO_USERNAME = "demo"


def is_demo_account(user: Any) -> bool:
    return bool(user.get_username() == DEMO_USERNAME)


class AccountBackend(ModelBackend):
    """Django's model backend, except that the demo account works only in demo mode."""

    def user_can_authenticate(self, user: Any) -> bool:
        if is_demo_account(user) and not settings.DEMO:
            return False
        return bool(super().user_can_authenticate(user))
