"""``user_role USERNAME ROLE [--remove]``: give a user a role (or take it away).

Exit codes (DESIGN §6): 0 done; 1 no such user; 2 usage (an unknown role).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts.access import ROLES
from accounts.roles import group_role, role_set, user_role
from audit.services import CLI_ACTOR, audit_record


class Command(BaseCommand):
    help = (
        "Set a user's role: viewer, editor or publisher (each includes the ones before); "
        "--remove takes it away. Exit 1: unknown user; 2: unknown role."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", help=f"one of {', '.join(ROLES)}")
        parser.add_argument("--remove", action="store_true", help="take the role away")
        parser.add_argument(
            "--actor", default=CLI_ACTOR, help="who is doing this, for the audit log (default cli)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username, role = options["username"], options["role"]
        if role not in ROLES:
            raise CommandError(f"unknown role {role!r}; roles: {', '.join(ROLES)}", returncode=2)
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}", returncode=1)
        with transaction.atomic():
            before = user_role(user)
            held = group_role(user)
            if options["remove"]:
                # Only the named role is taken away: removing "editor" from a publisher
                # changes nothing rather than silently demoting them.
                action, wanted = "role.remove", None if held == role else held
            else:
                action, wanted = "role.grant", role
            if wanted != held:
                role_set(user, wanted)
            audit_record(
                actor=options["actor"],
                action=action,
                target=f"user {username}",
                before={"role": before},
                after={"role": user_role(user)},
            )
        now = user_role(user)
        if user.is_superuser:
            self.stderr.write(f"{username} is a superuser: every role applies whatever the groups")
        self.stdout.write(f"{username}: {now or 'no role'}")
