"""Rebuild the tool-health tallies from the stored events (a database from before them), or
check that the kept ones equal a rebuild."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from observe.health.tallies import recomputed_tallies, stored_tallies, tool_health_backfill


class Command(BaseCommand):
    help = (
        "Rebuild the tool-health tallies from the stored events. Safe to rerun: the tallies are"
        " replaced, never added to; ingest waits while it runs. --check changes nothing and"
        " exits 1 when the kept tallies differ from a rebuild."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="compare the kept tallies with a rebuild from the stored events; change nothing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            kept, rebuilt = stored_tallies(), recomputed_tallies()
            differ = sorted(
                key for key in kept.keys() | rebuilt.keys() if kept.get(key) != rebuilt.get(key)
            )
            if differ:
                shown = ", ".join("/".join(key) for key in differ[:5])
                raise CommandError(
                    f"Tool health: {len(differ)} of {len(rebuilt)} buckets differ from a rebuild"
                    f" from the stored events (first: {shown}). Run toolhealth_backfill.",
                    returncode=1,
                )
            self.stdout.write(f"Tool health: all {len(kept)} buckets equal a rebuild.")
            return
        written = tool_health_backfill()
        self.stdout.write(f"Tool health: {written} buckets rebuilt from the stored events.")
