"""Rebuild the tool-health tallies from the stored events (a database from before them)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from observe.health.tallies import tool_health_backfill


class Command(BaseCommand):
    help = (
        "Rebuild the tool-health tallies from the stored events. Safe to rerun: the tallies are"
        " replaced, never added to; ingest waits while it runs."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        written = tool_health_backfill()
        self.stdout.write(f"Tool health: {written} buckets rebuilt from the stored events.")
