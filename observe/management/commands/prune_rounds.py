"""``prune_rounds [--older-than 30d]``: delete rounds (their events, their tool-health tallies)
past the retention."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from observe.partitions import partitioned
from observe.services import rounds_prune

_AGE = re.compile(r"([0-9]{1,6})([dh])")
_UNITS = {"d": "days", "h": "hours"}


def parse_age(text: str) -> timedelta:
    """``30d`` or ``12h`` → a duration; anything else is a usage error (exit 2)."""
    match = _AGE.fullmatch(text.strip())
    if match is None:
        raise CommandError(
            f"--older-than must be a whole number of days or hours, like 30d or 12h (got {text!r})",
            returncode=2,
        )
    amount, unit = match.groups()
    return timedelta(**{_UNITS[unit]: int(amount)})


class Command(BaseCommand):
    help = (
        "Delete rounds that started longer ago than --older-than (default: the"
        " ROUND_RETENTION_DAYS setting), with their events and their calls in the tool-health"
        " tallies. Exit 2 on a malformed age."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        # A plain string, checked in handle(): an argparse type error would exit 2 from the
        # command line but 1 through call_command, and print the usage too.
        parser.add_argument(
            "--older-than",
            metavar="AGE",
            help="an age in days or hours, like 30d or 12h",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        text = options["older_than"]
        age = parse_age(text) if text is not None else timedelta(days=settings.ROUND_RETENTION_DAYS)
        # An age in days prunes whole days on PostgreSQL (partitions dropped, nothing deleted
        # row by row): the cutoff is that day's midnight (UTC), rounds are kept up to a day
        # longer.
        whole_days = partitioned() and (text is None or text.strip().endswith("d"))
        try:
            cutoff = timezone.now() - age
        except OverflowError:  # older than year 1: nothing can be
            cutoff = datetime.min.replace(tzinfo=UTC)
        if whole_days:
            cutoff = cutoff.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        deleted = rounds_prune(older_than=cutoff)
        noun = "round" if deleted == 1 else "rounds"
        self.stdout.write(f"deleted {deleted} {noun} that started before {cutoff.isoformat()}")
