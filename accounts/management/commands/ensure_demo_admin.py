"""``ensure_demo_admin``: the demo superuser (``demo`` / ``demo-traitdeck``), demo mode only."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.backends import DEMO_USERNAME

DEMO_PASSWORD = "demo-traitdeck"


class Command(BaseCommand):
    help = (
        "Create or reset the demo superuser. Refuses unless TRAITDECK_DEMO=1 (never in production)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEMO:
            raise CommandError(
                "the demo admin exists only in demo mode (TRAITDECK_DEMO=1)", returncode=1
            )
        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(username=DEMO_USERNAME)
        user.is_staff = True
        user.is_superuser = True
        user.is_active = True
        user.set_password(DEMO_PASSWORD)
        user.save()
        self.stdout.write(f"demo admin: username {DEMO_USERNAME!r}, password {DEMO_PASSWORD!r}")
