"""``kdcube_bridge``: read the KDCube runtime's chat events from Redis, post them as rounds.

    python manage.py kdcube_bridge --redis redis://127.0.0.1:6379/0 --url http://127.0.0.1:8000 \\
        --token $TRAITDECK_TOKEN [--pattern 'kdcube.relay.chatbot.*'] [--name kdcube]

The token needs ``events:write``. Runs until Ctrl-C / SIGTERM (then posts what it holds). Exit
codes (DESIGN §6): 0 stopped; 1 the server refused the token; 2 usage error.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from typing import Any, Final

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bridge.domain.mapping import DEFAULT_PATTERN
from bridge.runner import MAX_PENDING, Bridge, Fatal, Options

TOKEN_ENV: Final = "TRAITDECK_TOKEN"


class Command(BaseCommand):
    help = "Turn the KDCube runtime's chat events on Redis into Traitdeck rounds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--redis", default=os.environ.get("KDCUBE_REDIS_URL", ""))
        parser.add_argument("--pattern", default=DEFAULT_PATTERN)
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--token", default=os.environ.get(TOKEN_ENV, ""))
        parser.add_argument("--name", default="kdcube")
        parser.add_argument("--batch-size", type=int, default=200)
        parser.add_argument("--flush-interval", type=float, default=0.5)
        parser.add_argument("--stats-interval", type=float, default=10.0)
        parser.add_argument(
            "--buffer-events",
            type=int,
            default=MAX_PENDING,
            help="events held while Traitdeck does not take them; when full the oldest rounds"
            " are dropped whole (default %(default)s)",
        )
        parser.add_argument(
            "--agents",
            default=None,
            help="comma-separated policy agents to map onto (default: the server's)",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        if not o["redis"]:
            raise CommandError("--redis URL is required (or KDCUBE_REDIS_URL)", returncode=2)
        if not o["token"]:
            raise CommandError(f"--token is required (or {TOKEN_ENV})", returncode=2)
        if not 1 <= o["batch_size"] <= 1000:
            raise CommandError("--batch-size must be between 1 and 1000", returncode=2)
        if not 1 <= o["buffer_events"] <= 10_000_000:
            raise CommandError("--buffer-events must be between 1 and 10000000", returncode=2)
        if not 0 < o["flush_interval"] <= 60 or not 0 < o["stats_interval"] <= 3600:
            raise CommandError("--flush-interval/--stats-interval out of range", returncode=2)
        agents = None
        if o["agents"] is not None:
            agents = frozenset(a.strip() for a in o["agents"].split(",") if a.strip())
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per post is noise
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

        def say(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        bridge = Bridge(
            Options(
                redis_url=o["redis"],
                url=o["url"],
                token=o["token"],
                pattern=o["pattern"],
                name=o["name"],
                batch_size=o["batch_size"],
                flush_s=o["flush_interval"],
                stats_s=o["stats_interval"],
                agents=agents,
                buffer_events=o["buffer_events"],
            ),
            stop=stop,
            say=say,
        )
        try:
            bridge.run()
        except Fatal as exc:
            raise CommandError(str(exc), returncode=1) from exc
        say(bridge.stats_line(0.0, bridge.counts))
