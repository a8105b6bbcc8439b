"""One Redis pub/sub subscription of the bridge's, and how it comes back after Redis goes away.

Both of the bridge's listeners (the chat events, ``kdcube.bridge.runner``; KDCube's props updates,
``kdcube.bridge.props_watch``) read Redis the same way: a client with short socket timeouts, one
``SUBSCRIBE`` or ``PSUBSCRIBE``, every waiting message read at once, and — when Redis fails —
the subscription closed and opened again after a short wait. KDCube publishes at most once, so
whatever is published before the bridge subscribes again is lost: the first retry comes after
0.1 s, then 0.25 s, then every 0.5 s, with ±20 % jitter so that several bridges do not reconnect
in step (subscribed again within ~0.6 s of Redis answering). No Django needed.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

import httpx
import redis

#: Waits before reconnecting to Redis (a connection attempt is cheap; a late one loses messages).
REDIS_RETRY: Final = (0.1, 0.25, 0.5)


def redis_retry_wait(attempt: int) -> float:
    """The wait before reconnect attempt ``attempt`` (0-based), with ±20 % jitter."""
    base = REDIS_RETRY[min(attempt, len(REDIS_RETRY) - 1)]
    return base * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not a secret


def redacted(url: str) -> str:
    """A Redis URL fit for a log line (its password hidden)."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(password="***")) if parsed.password else url


class Subscription:
    """A subscription to ``channel`` or to ``pattern``, opened on demand. ``read`` and ``open``
    raise ``redis.RedisError`` / ``OSError`` when Redis fails; the caller then calls ``close``
    and waits :func:`redis_retry_wait` before opening again."""

    def __init__(self, url: str, *, channel: str | None = None, pattern: str | None = None):
        if (channel is None) == (pattern is None):
            raise ValueError("a subscription has a channel or a pattern")
        self.url = url
        self.channel = channel
        self.pattern = pattern
        self._client: Any = None
        self._pubsub: Any = None

    @property
    def open_now(self) -> bool:
        return self._pubsub is not None

    def open(self) -> None:
        self._client = redis.Redis.from_url(
            self.url, socket_connect_timeout=3, socket_timeout=5, health_check_interval=5
        )
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        if self.pattern is not None:
            pubsub.psubscribe(self.pattern)
        else:
            pubsub.subscribe(self.channel)
        self._pubsub = pubsub

    def read(self, timeout: float) -> Iterator[tuple[str, bytes | str]]:
        """Every message waiting now, as (channel, payload), after waiting up to ``timeout``
        for the first."""
        message = self._pubsub.get_message(timeout=timeout)
        while message is not None:
            if message.get("type") in ("message", "pmessage"):
                channel = message["channel"]
                if isinstance(channel, bytes):
                    channel = channel.decode("utf-8", "replace")
                yield channel, message["data"]
            message = self._pubsub.get_message(timeout=0)

    def close(self) -> None:
        for thing in (self._pubsub, self._client):
            try:
                if thing is not None:
                    thing.close()
            except (redis.RedisError, OSError):
                pass
        self._pubsub = self._client = None


class Listener[O]:
    """What both listeners are made of: their options (``o``), the event that stops them, where
    they report (``say``), Traitdeck's HTTP client and their subscription, which :meth:`pump`
    reads and opens again after Redis fails."""

    def __init__(
        self,
        options: O,
        http: httpx.Client,
        subscription: Subscription,
        *,
        stop: threading.Event | None,
        say: Callable[[str], None],
    ) -> None:
        self.o = options
        self.stop = stop or threading.Event()
        self.say = say
        self.http = http
        self.subscription = subscription
        self._attempt = 0

    def pump(
        self,
        timeout: float,
        handle: Callable[[str, bytes | str], None],
        *,
        subscribed: str,
        name: str,
    ) -> float | None:
        """Open the subscription when it is closed (saying ``subscribed``), then hand every
        message waiting within ``timeout`` to ``handle``. When Redis fails: ``None`` no more, but
        the wait before the next attempt (the first failure of an outage is said, as
        "``name``: Redis unavailable")."""
        try:
            if not self.subscription.open_now:
                self.subscription.open()
                self.say(subscribed)
                self._attempt = 0
            for channel, payload in self.subscription.read(timeout):
                handle(channel, payload)
        except (redis.RedisError, OSError) as exc:
            self.subscription.close()
            if self._attempt == 0:
                self.say(f"{name}: Redis unavailable ({exc}); reconnecting")
            wait = redis_retry_wait(self._attempt)
            self._attempt += 1
            return wait
        return None
