"""The live rounds websocket: pushes changed rounds, rendered as cards, to one live page.

Ingest sends one group message per stored batch with the facts of each round it changed; the
consumer adds them to its counters (no query) and takes the batch's cards from
:func:`observe.live.stream.fragments`, rendered once per process for every viewer. Versions are
contiguous, so a message the layer dropped (the in-memory layer does so silently when a queue is
full) shows as a gap: the consumer then catches up from the database (every round changed since,
at its latest version, counters counted again). A periodic tick notices a drop with no later
message. Every message carries a per-connection sequence number, so the page can tell when it
missed one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import QueryDict

from accounts.access import VIEWER
from accounts.sessions import session_allows
from observe.health.live import alerts_fragment
from observe.live import Counters, Tally, parse_filter, parse_since
from observe.live.stream import (
    CatchUp,
    apply_change,
    catch_up,
    changes_of,
    fragments,
    matching,
    stream_message,
)
from observe.selectors import RoundFilter, latest_version
from observe.services import LIVE_GROUP

logger = logging.getLogger(__name__)

#: Close code for a socket opened without a logged-in session (htmx does not reconnect on it),
#: or whose session ended since (logout, expiry): the page asks for a login.
UNAUTHENTICATED = 4401
#: Close code for a user without the viewer role (never had it, or it was taken away).
FORBIDDEN = 4403
#: Close code for a user who already holds ``TRAITDECK_MAX_WEBSOCKETS_PER_USER`` live streams.
TOO_MANY_STREAMS = 4429
#: Close code for a client that sends anything: the stream is one-way, the page never sends.
#: RFC 6455's 1003 ("unsupported data") would say it, but daphne's websocket layer (autobahn)
#: lets a server close only with 1000 or 3000–4999 and turned 1003 into a 1011 and a traceback;
#: 4415 is the application-range code, like 4401/4403/4429 (HTTP's 415 Unsupported Media Type).
UNSUPPORTED_DATA = 4415

#: Live streams open per user id, in this process: with several workers the cap holds per
#: worker (a user may hold up to cap × workers in all). It bounds what one user can make one
#: worker hold, which is the point; a shared count would need a store that forgets the streams
#: of a worker that died.
_open_streams: Counter[Any] = Counter()


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
def _catch_up(round_filter: RoundFilter, since: int) -> CatchUp:
    return catch_up(round_filter, since)


class LiveRoundsConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    """``/ws/live/?since=<version>&agent=…&has=…`` (login required).

    Sends one message per refresh that found something: the changed cards (appended to
    ``#incoming``), ``#counters`` and ``#live-seq`` (``data-seq`` counts this connection's
    messages from 1). A refresh runs on connect, on every ``rounds.changed`` group message and
    every ``tick_seconds``.

    The protocol is one-way (server → page): anything a client sends closes its stream with
    4415 and is never parsed. One user holds at most ``TRAITDECK_MAX_WEBSOCKETS_PER_USER``
    streams (per worker); one more is closed with 4429, which the page explains.
    """

    #: ``TRAITDECK_LIVE_TICK_SECONDS`` (the scale tests stretch it to prove the Redis path).
    tick_seconds: float = settings.TRAITDECK_LIVE_TICK_SECONDS
    #: How often a stream that could not join the channel layer at connect tries again.
    rejoin_seconds: float = 1.0
    #: How often the session and the role are checked again: a logout, an expired session or
    #: a role taken away ends the stream within this many seconds.
    session_check_seconds: float = 3.0
    #: How long a batch that arrived ahead of a missing one waits for it (another worker's
    #: message may simply be late) before the consumer catches up from the database.
    gap_wait_seconds: float = 0.25

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.round_filter = RoundFilter()
        self.last_version = 0
        self.seq = 0
        self.counters: Counters | None = None
        self.tally: Tally | None = None
        #: Batches that arrived ahead of a missing one: first version → message.
        self.pending: dict[int, dict[str, Any]] = {}
        self._joined = False
        self._layer_warned = False
        self._ticker: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._healer: asyncio.Task[None] | None = None
        self._rejoiner: asyncio.Task[None] | None = None
        #: Whether a batch message came since the last tick.
        self._heard = False
        self._lock = asyncio.Lock()
        #: The user id this stream is counted against (``None``: not counted).
        self._stream_slot: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Channels' dispatch loop, which ends in an exception when a handler fails (daphne
        then closes with 1011 and never calls ``disconnect``): whatever ends this stream stops
        its tasks and gives its user's slot back, or ten failures would lock a user out of a cap
        of ten until a restart."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._stop()

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Accept first: a refused handshake reaches the browser as 1006, which htmx retries
            # forever; a close with our code tells the page to ask for a login instead.
            await self.accept()
            await self.close(code=UNAUTHENTICATED)
            return
        refusal = await _session_allows(user, self._session_key())
        if refusal is None and not self._take_stream_slot(user.pk):
            refusal = TOO_MANY_STREAMS
        if refusal is not None:
            await self.accept()
            await self.close(code=refusal)
            return
        try:
            await self._start()
        except BaseException:
            self._release_stream_slot()  # disconnect() is not called when connect fails
            raise

    async def _start(self) -> None:
        query = QueryDict(self.scope.get("query_string", b"").decode("utf-8", "replace"))
        self.round_filter = parse_filter(query).round_filter
        since = parse_since(query.get("since"))
        # Join before reading anything, so a change in between is not missed.
        await self._join()
        await self.accept()
        if since is None:
            since = await _latest_version()
        self.last_version = since
        await self.catch_up(quiet_if_nothing=True)
        self._ticker = asyncio.create_task(self._tick())
        self._watcher = asyncio.create_task(self._watch_session())
        if not self._joined:
            self._rejoiner = asyncio.create_task(self._rejoin())

    async def _rejoin(self) -> None:
        """The layer was away at connect: try again every ``rejoin_seconds`` (not only each
        tick, which may be minutes apart), then catch up with what changed meanwhile."""
        while not self._joined:
            await asyncio.sleep(self.rejoin_seconds)
            await self._join()
        try:
            await self.catch_up(quiet_if_nothing=True)
        except Exception:
            logger.exception("live stream catch-up after rejoining failed; the tick heals it")

    async def _join(self) -> None:
        """Join the live group, again on every tick: joining is idempotent, and a channel layer
        that was away (Redis restarted, its groups gone) gets this stream back without a
        reconnect. A layer that cannot be reached now is logged, not a failed handshake: the
        tick's database re-read keeps the page current until the layer is back."""
        try:
            await self.channel_layer.group_add(LIVE_GROUP, self.channel_name)
        except Exception as exc:
            if self._joined or not self._layer_warned:
                logger.warning(
                    "live stream: channel layer unreachable (%s); reading the database each tick",
                    exc,
                )
            self._layer_warned = True
            self._joined = False
            return
        self._joined = True
        self._layer_warned = False

    def _take_stream_slot(self, user_id: Any) -> bool:
        """Count this stream against its user's cap; ``False`` when the user is at the cap."""
        cap = settings.TRAITDECK_MAX_WEBSOCKETS_PER_USER
        if 0 < cap <= _open_streams[user_id]:
            return False
        _open_streams[user_id] += 1
        self._stream_slot = user_id
        return True

    def _release_stream_slot(self) -> None:
        user_id, self._stream_slot = self._stream_slot, None
        if user_id is not None:
            _open_streams[user_id] -= 1
            if _open_streams[user_id] <= 0:
                del _open_streams[user_id]

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The stream is one-way: the live page never sends. Anything a client sends (garbage
        text, JSON, binary) closes that client's stream with 4415, unread; other viewers go on.
        (Malformed frames and text that is not UTF-8 never get here: daphne's websocket layer
        closes such a connection itself.)"""
        await self._stop()
        await self.close(code=UNSUPPORTED_DATA)

    def _session_key(self) -> str | None:
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        return key if isinstance(key, str) else None

    async def disconnect(self, code: int) -> None:
        await self._stop()

    async def _stop(self) -> None:
        """Stop sending: out of the group, no more ticks; the user's slot given back."""
        self._release_stream_slot()
        for task in (self._ticker, self._watcher, self._healer, self._rejoiner):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._joined:
            self._joined = False
            try:
                await self.channel_layer.group_discard(LIVE_GROUP, self.channel_name)
            except Exception as exc:  # the layer is away; its group entry expires by itself
                logger.warning("live stream: could not leave the group (%s)", exc)

    async def rounds_changed(self, event: dict[str, Any]) -> None:
        """Group message from ingest (see :mod:`observe.live.stream`)."""
        first, version = event.get("first"), event.get("version")
        if not isinstance(first, int) or not isinstance(version, int):
            return
        self._heard = True
        async with self._lock:
            if version <= self.last_version:
                return  # already covered by a catch-up
            if first > self.last_version + 1:
                # A batch is missing: it may still come (another worker's), else the tick or
                # the next message catches up.
                self.pending[first] = event
                if self._healer is None or self._healer.done():
                    self._healer = asyncio.create_task(self._heal_gap())
                return
            await self._apply(event)
            while self.last_version + 1 in self.pending:
                await self._apply(self.pending.pop(self.last_version + 1))

    async def _heal_gap(self) -> None:
        await asyncio.sleep(self.gap_wait_seconds)
        if self.pending:
            try:
                await self.catch_up()
            except Exception:
                logger.exception("live stream catch-up failed; the tick tries again")

    async def _apply(self, event: dict[str, Any]) -> None:
        """One batch, in version order: counters from its facts, cards from the shared render."""
        since = self.last_version
        changes = changes_of(event)
        known = {entry.pk: entry.after for entry in changes}
        found = await fragments(
            event["first"], event["version"], str(event.get("stamp", "")), known
        )
        if self.tally is not None:
            apply_change(self.tally, changes)
        self.last_version = event["version"]
        shown = matching(self.round_filter, found, since)
        await self._send([f.html for f in shown])

    async def _send(self, html: list[Any], *, caught_up: int = 0, force: bool = False) -> None:
        counters = self.tally.counters() if self.tally is not None else Counters()
        if not html and not force and counters == self.counters:
            return
        self.counters = counters
        self.seq += 1
        message = stream_message(html, counters, seq=self.seq, caught_up=caught_up)
        await self.send(text_data=message + await alerts_fragment())

    async def catch_up(self, *, quiet_if_nothing: bool = False) -> None:
        async with self._lock:
            await self._catch_up_locked(quiet_if_nothing=quiet_if_nothing)

    async def _catch_up_locked(self, *, quiet_if_nothing: bool = False) -> None:
        """Every round changed since ``last_version``, at its latest version, counters counted
        afresh."""
        caught = await _catch_up(self.round_filter, self.last_version)
        self.pending = {first: e for first, e in self.pending.items() if first > caught.version}
        self.last_version = max(self.last_version, caught.version)
        first_time = self.tally is None
        self.tally = caught.tally
        if first_time and quiet_if_nothing:
            # What the page just rendered: only a change (or the per-minute figures moving)
            # sends.
            self.counters = caught.tally.counters()
        messages = caught.messages()
        for number, found in enumerate(messages):
            # Every changed round reaches the page (a long catch-up in several messages); the
            # first message states what was left out, if anything.
            await self._send(
                [f.html for f in found],
                caught_up=caught.skipped if number == 0 else 0,
                force=number > 0,
            )
        while self.last_version + 1 in self.pending:
            await self._apply(self.pending.pop(self.last_version + 1))

    async def refresh(self) -> None:
        """The tick: when no batch message came since the last tick yet the database holds
        newer versions, the last message was dropped: catch up. (Under load messages queue
        up and keep coming; a dropped one then shows as a gap in the versions.) Else send the
        counters if the per-minute figures moved."""
        if self._heard:
            self._heard = False
        elif await _latest_version() > self.last_version:
            await self.catch_up()
            return
        async with self._lock:
            await self._send([])

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            await self._join()
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
