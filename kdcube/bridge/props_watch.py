"""Config drift at run time: the bridge also listens to KDCube's props-update channel.

KDCube publishes ``{"type": "bundles.props.update", bundle_id, tenant, project, ts, updated_by?,
source?}`` on ``kdcube:config:bundles:props:update:{tenant}:{project}`` after every write of a
bundle's props. For the configured bundle the watcher tells Traitdeck
(``POST /api/v1/kdcube/props-changed``), which reads the props with its own KDCube token and
compares them with the version in force; the bridge never holds that token.

KDCube publishes at most once and never replays, so a fallback poll asks the same every
``poll_s`` (default three minutes) whatever Redis does: while Redis is down the watcher
reconnects as the chat-event listener does (``kdcube.bridge.subscription``) and the poll still
finds a change. No Django needed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import httpx

from kdcube.bridge.runner import traitdeck_client
from kdcube.bridge.subscription import Listener, Subscription

logger = logging.getLogger("bridge")

CHANNEL: Final = "kdcube:config:bundles:props:update:{tenant}:{project}"
CHANGED_PATH: Final = "/api/v1/kdcube/props-changed"
DEFAULT_POLL_S: Final = 180.0


@dataclass(frozen=True)
class WatchOptions:
    redis_url: str
    url: str
    token: str
    tenant: str
    project: str
    bundle: str
    poll_s: float = DEFAULT_POLL_S

    @property
    def channel(self) -> str:
        return CHANNEL.format(tenant=self.tenant, project=self.project)


class PropsWatch(Listener[WatchOptions]):
    def __init__(
        self,
        options: WatchOptions,
        *,
        stop: threading.Event | None = None,
        say: Callable[[str], None] = logger.info,
    ) -> None:
        super().__init__(
            options,
            # Traitdeck reads KDCube before it answers: allow for KDCube's own time limit.
            traitdeck_client(options.url, options.token, 30.0),
            Subscription(options.redis_url, channel=options.channel),
            stop=stop,
            say=say,
        )
        self.notified = 0

    def notify(self, source: str, updated_by: str = "") -> None:
        """Ask Traitdeck to read the props and compare; its failures are logged, not fatal."""
        try:
            response = self.http.post(
                CHANGED_PATH, json={"source": source, "updated_by": updated_by}
            )
        except httpx.HTTPError as exc:
            self.say(f"props watch: Traitdeck unreachable ({type(exc).__name__})")
            return
        self.notified += 1
        if response.status_code != 200:
            self.say(f"props watch: Traitdeck answered {response.status_code}")

    def handle(self, data: bytes | str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("type") != "bundles.props.update":
            return
        if str(message.get("bundle_id") or "") != self.o.bundle:
            return
        self.notify("listener", str(message.get("updated_by") or "")[:150])

    def run(self) -> None:
        next_poll = time.monotonic() + self.o.poll_s
        retry_at = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_poll:
                self.notify("poll")
                next_poll = now + self.o.poll_s
            wait = max(0.05, min(1.0, next_poll - now))
            if not self.subscription.open_now and now < retry_at:
                self.stop.wait(min(wait, retry_at - now))
                continue
            delay = self.pump(
                wait,
                lambda _channel, payload: self.handle(payload),
                subscribed=f"props watch: subscribed to {self.o.channel}",
                name="props watch",
            )
            if delay is not None:
                retry_at = time.monotonic() + delay
        self.subscription.close()
        self.http.close()
