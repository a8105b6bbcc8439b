"""The live rounds websocket: pushes changed rounds, rendered as cards, to one live page.

The channel layer only says "rounds changed up to version N"; the consumer then asks the database
for what changed since the last version it saw, so a group message that the in-memory layer drops
(it does so silently when a queue is full) only delays an update: a periodic tick asks again.
Every message carries a per-connection sequence number, so the page can tell when it missed one
and reload its list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import QueryDict

from accounts.access import VIEWER
from accounts.sessions import session_allows
from observe.live import (
    Counters,
    StreamUpdate,
    counters_for,
    parse_filter,
    parse_since,
    stream_update,
)
from observe.selectors import RoundFilter, latest_version
from observe.services import LIVE_GROUP

logger = logging.getLogger(__name__)

#: Close code for a socket opened without a logged-in session (htmx does not reconnect on it),
#: or whose session ended since (logout, expiry): the page asks for a login.
UNAUTHENTICATED = 4401
#: Close code for a user without the viewer role (never had it, or it was taken away).
FORBIDDEN = 4403


def _db[**P, T](func: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """``database_sync_to_async`` with its types (channels ships none)."""
    wrapped: Callable[P, Awaitable[T]] = database_sync_to_async(func)
    return wrapped


@_db
def _session_allows(user: Any, session_key: str | None) -> int | None:
    return session_allows(
        user, session_key, role=VIEWER, unauthenticated=UNAUTHENTICATED, forbidden=FORBIDDEN
    )


@_db
def _latest_version() -> int:
    return latest_version()


@_db
def _counters(round_filter: RoundFilter) -> Counters:
    return counters_for(round_filter)


@_db
def _update(
    round_filter: RoundFilter, since: int, seq: int, shown: Counters | None
) -> StreamUpdate:
    return stream_update(round_filter, since, seq=seq, shown=shown)


class LiveRoundsConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    """``/ws/live/?since=<version>&agent=…&has=…`` (login required).

    Sends one message per refresh that found something: the changed cards (appended to
    ``#incoming``), ``#counters`` and ``#live-seq`` (``data-seq`` counts this connection's
    messages from 1). A refresh runs on connect, on every ``rounds.changed`` group message and
    every ``tick_seconds``.
    """

    #: ``TRAITDECK_LIVE_TICK_SECONDS`` (the scale tests stretch it to prove the Redis path).
    tick_seconds: float = settings.TRAITDECK_LIVE_TICK_SECONDS
    #: How often the session and the role are checked again: a logout, an expired session or
    #: a role taken away ends the stream within this many seconds.
    session_check_seconds: float = 3.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.round_filter = RoundFilter()
        self.last_version = 0
        self.seq = 0
        self.counters: Counters | None = None
        self._joined = False
        self._ticker: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Accept first: a refused handshake reaches the browser as 1006, which htmx retries
            # forever; a close with our code tells the page to ask for a login instead.
            await self.accept()
            await self.close(code=UNAUTHENTICATED)
            return
        refusal = await _session_allows(user, self._session_key())
        if refusal is not None:
            await self.accept()
            await self.close(code=refusal)
            return
        query = QueryDict(self.scope.get("query_string", b"").decode("utf-8", "replace"))
        self.round_filter = parse_filter(query).round_filter
        since = parse_since(query.get("since"))
        self.last_version = since if since is not None else await _latest_version()
        # What the page just rendered: only a change (or the per-minute figures moving) sends.
        self.counters = await _counters(self.round_filter)
        # Join before the first refresh, so a change between the two is not missed.
        await self.channel_layer.group_add(LIVE_GROUP, self.channel_name)
        self._joined = True
        await self.accept()
        await self.refresh()
        self._ticker = asyncio.create_task(self._tick())
        self._watcher = asyncio.create_task(self._watch_session())

    def _session_key(self) -> str | None:
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        return key if isinstance(key, str) else None

    async def disconnect(self, code: int) -> None:
        for task in (self._ticker, self._watcher):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._joined:
            await self.channel_layer.group_discard(LIVE_GROUP, self.channel_name)

    async def rounds_changed(self, event: dict[str, Any]) -> None:
        """Group message from ingest: ``{"type": "rounds.changed", "version": n}``."""
        version = event.get("version")
        if isinstance(version, int) and version <= self.last_version:
            return  # already sent by an earlier refresh (messages pile up under load)
        await self.refresh()

    async def refresh(self) -> None:
        """Send what changed since ``last_version`` (and matches the filter), if anything."""
        async with self._lock:
            update = await _update(
                self.round_filter, self.last_version, self.seq + 1, self.counters
            )
            self.last_version = update.version
            self.counters = update.counters
            if update.message is not None:
                self.seq += 1
                await self.send(text_data=update.message)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            try:
                await self.refresh()
            except Exception:
                # Keep ticking: a database hiccup must not end the healing of dropped messages.
                logger.exception("live stream refresh failed; trying again on the next tick")

    async def _watch_session(self) -> None:
        """Close the stream once its session ends or its user loses the role."""
        while True:
            await asyncio.sleep(self.session_check_seconds)
            try:
                refusal = await _session_allows(self.scope.get("user"), self._session_key())
            except Exception:
                logger.exception("live stream session check failed; trying again")
                continue
            if refusal is not None:
                if self._ticker is not None:
                    self._ticker.cancel()
                await self.close(code=refusal)
                return
