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

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kdcube.bridge.domain.mapping import DEFAULT_PATTERN
from kdcube.bridge.props_watch import DEFAULT_POLL_S, PropsWatch, WatchOptions
from kdcube.bridge.runner import MAX_PENDING, Bridge, Fatal, Options

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
                isolation_timeout_s=settings.TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S,
            ),
            stop=stop,
            say=say,
        )
        watch = props_watch(o, stop=stop, say=say)
        try:
            bridge.run()
        except Fatal as exc:
            raise CommandError(str(exc), returncode=1) from exc
        finally:
            stop.set()
            if watch is not None:
                watch.join(timeout=5)
        say(bridge.stats_line(0.0, bridge.counts))


def props_watch(o: dict[str, Any], *, stop: threading.Event, say: Any) -> threading.Thread | None:
    """With the KDCube target's tenant, project and bundle set (the TRAITDECK_KDCUBE_* settings
    the server uses), watch its props-update channel on the same Redis for config drift."""
    names = ("TENANT", "PROJECT", "BUNDLE")
    values = {n: os.environ.get(f"TRAITDECK_KDCUBE_{n}", "").strip() for n in names}
    if not all(values.values()):
        return None
    try:
        poll_s = float(os.environ.get("TRAITDECK_KDCUBE_POLL_S") or DEFAULT_POLL_S)
    except ValueError:
        poll_s = DEFAULT_POLL_S
    watch = PropsWatch(
        WatchOptions(
            redis_url=o["redis"],
            url=o["url"],
            token=o["token"],
            tenant=values["TENANT"],
            project=values["PROJECT"],
            bundle=values["BUNDLE"],
            poll_s=max(5.0, poll_s),
        ),
        stop=stop,
        say=say,
    )
    thread = threading.Thread(target=watch.run, name="props-watch", daemon=True)
    thread.start()
    return thread
