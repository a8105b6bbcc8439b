"""``partitions_upkeep [--ahead 7]``: create the day partitions of rounds, their tool rows and
their events from yesterday to ``--ahead`` days after today (PostgreSQL; nothing on SQLite).
Rows of those days already in the default partition move into their day's partition."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from observe.partitions import AHEAD_DAYS, partitioned, partitions_ensure, upkeep_days


class Command(BaseCommand):
    help = (
        "Create the day partitions of rounds and events ahead of time (PostgreSQL). Run it with"
        " prune_rounds, at least daily."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--ahead",
            type=int,
            default=AHEAD_DAYS,
            choices=range(0, 367),
            metavar="DAYS",
            help=f"days after today to create (0-366, default {AHEAD_DAYS})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not partitioned():
            self.stdout.write("not partitioned (SQLite): nothing to do")
            return
        made = partitions_ensure(upkeep_days(timezone.now().date(), options["ahead"]))
        days = ", ".join(day.isoformat() for day in made) or "none (all there)"
        self.stdout.write(f"partitions created: {days}")
