"""``runtime_token create|list|revoke``: manage the tokens machines use to call the API."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Scope
from accounts.selectors import runtime_token_list
from accounts.tokens import (
    TokenExists,
    TokenNotFound,
    runtime_token_create,
    runtime_token_revoke,
)
from audit.services import add_actor_argument, cli_actor


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


class Command(BaseCommand):
    help = "Create, list and revoke runtime tokens (exit 1: unknown or duplicate name; 2: usage)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, parser_class=CommandParser)
        create = sub.add_parser("create", help="create a token and print its secret (only once)")
        create.add_argument("name")
        create.add_argument(
            "--scope",
            dest="scopes",
            action="append",
            choices=Scope.values,
            required=True,
            help="a scope the token carries (repeatable)",
        )
        create.add_argument(
            "--rotate", action="store_true", help="replace an existing token of that name"
        )
        add_actor_argument(create)
        listing = sub.add_parser("list", help="list tokens (never their secrets)")
        listing.add_argument("--format", choices=["text", "json"], default="text")
        revoke = sub.add_parser("revoke", help="revoke a token: it stops working at once")
        revoke.add_argument("name")
        add_actor_argument(revoke)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            try:
                issued = runtime_token_create(
                    name=options["name"],
                    scopes=options["scopes"],
                    rotate=options["rotate"],
                    actor=cli_actor(options["actor"]),
                )
            except TokenExists as exc:
                raise CommandError(
                    f"a token named {options['name']!r} already exists; use --rotate to replace it",
                    returncode=1,
                ) from exc
            self.stdout.write(issued.secret)
        elif action == "list":
            self._list(options["format"])
        elif action == "revoke":
            try:
                runtime_token_revoke(name=options["name"], actor=cli_actor(options["actor"]))
            except TokenNotFound as exc:
                raise CommandError(f"no token named {options['name']!r}", returncode=1) from exc
            self.stderr.write(f"revoked {options['name']}")

    def _list(self, fmt: str) -> None:
        rows: list[dict[str, Any]] = [
            {
                "name": t.name,
                "scopes": list(t.scopes),
                "created": _iso(t.created_at),
                "last_used": _iso(t.last_used_at),
                "revoked": _iso(t.revoked_at),
            }
            for t in runtime_token_list()
        ]
        if fmt == "json":
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("no runtime tokens")
            return
        for row in rows:
            self.stdout.write(
                f"{row['name']}\tscopes={','.join(row['scopes'])}\tcreated={row['created']}"
                f"\tlast_used={row['last_used'] or 'never'}\trevoked={row['revoked'] or 'no'}"
            )
