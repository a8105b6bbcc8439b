"""The KDCube bridge at run time: Redis in, Traitdeck's ingest API out (no Django needed).

- Redis, on a thread of its own: ``PSUBSCRIBE`` to the relay's chat-event channels (default
  ``kdcube.relay.chatbot.*``, only ``…:chat.events.<session>`` channels are read), mapping each
  message into the bounded :class:`~kdcube.bridge.domain.buffer.RoundBuffer`. It keeps reading while
  posting is blocked: KDCube publishes at most once, and Redis cuts off a subscriber whose
  output buffer fills. When Redis goes away it reconnects after 0.1 s, then 0.25 s, then every
  0.5 s (±20 % jitter): subscribed again within ~0.6 s of Redis answering.
- HTTP, on the main thread: events are batched (up to ``batch_size``, or every ``flush_s``) and
  posted to ``POST /api/v1/events`` like any runtime: a 503/429 is retried after its
  ``Retry-After``, a connection failure or other 5xx with backoff; the batch is kept meanwhile
  (ids are derived from the envelopes, so a re-post only counts duplicates). 401/403 stop the
  bridge; a 4xx batch is dropped and counted as refused (never retried forever).
- Every ``stats_s`` a log line (envelopes/s, mapped, inferred, skipped by reason) and a heartbeat
  to ``POST /api/v1/bridge/status``, whose answer lists the policy's agents for the mapping.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from kdcube.bridge.domain.buffer import RoundBuffer
from kdcube.bridge.domain.mapping import DEFAULT_PATTERN, ISOLATION_TIMEOUT_S, Mapper
from kdcube.bridge.subscription import Listener, Subscription, redacted

logger = logging.getLogger("bridge")

EVENTS_PATH: Final = "/api/v1/events"
STATUS_PATH: Final = "/api/v1/bridge/status"
MAX_PENDING: Final = 50_000
#: Waits before retrying Traitdeck (a down server is not hammered).
BACKOFF: Final = (0.5, 1.0, 2.0, 4.0, 8.0, 10.0)


class Fatal(Exception):
    """The bridge cannot go on (the server refused its token)."""


@dataclass
class Counts:
    envelopes: int = 0
    mapped: int = 0
    inferred: int = 0
    skipped: int = 0
    events: int = 0
    posted: int = 0
    refused: int = 0
    dropped_rounds: int = 0
    dropped_events: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    last_envelope_ms: int | None = None

    def report(self) -> dict[str, Any]:
        return {
            "envelopes": self.envelopes,
            "mapped": self.mapped,
            "inferred": self.inferred,
            "skipped": self.skipped,
            "events": self.events,
            "posted": self.posted,
            "refused": self.refused,
            "dropped_rounds": self.dropped_rounds,
            "dropped_events": self.dropped_events,
            "reasons": dict(self.reasons.most_common(20)),
        }


@dataclass
class Options:
    redis_url: str
    url: str
    token: str
    pattern: str = DEFAULT_PATTERN
    name: str = "kdcube"
    batch_size: int = 200
    flush_s: float = 0.5
    stats_s: float = 10.0
    agents: frozenset[str] | None = None  # fixed agent list (else the server's)
    #: Events held while Traitdeck does not take them; past it the oldest rounds are dropped.
    buffer_events: int = MAX_PENDING
    #: The runtime's isolated-call limit (``TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S``).
    isolation_timeout_s: float = ISOLATION_TIMEOUT_S


def traitdeck_client(
    url: str, token: str, timeout_s: float, *, transport: httpx.BaseTransport | None = None
) -> httpx.Client:
    """The bridge's HTTP client for Traitdeck's API: its token, its user agent, a short
    connect timeout and ``timeout_s`` for the answer."""
    return httpx.Client(
        transport=transport,
        base_url=url.rstrip("/"),
        headers={"Authorization": f"Bearer {token}", "User-Agent": "traitdeck-kdcube-bridge/1"},
        timeout=httpx.Timeout(timeout_s, connect=3.0),
    )


def _retry_after(response: httpx.Response, default: float) -> float:
    raw = response.headers.get("Retry-After", "")
    try:
        return min(60.0, max(0.0, float(raw)))
    except ValueError:
        return default


class Bridge(Listener[Options]):
    def __init__(
        self,
        options: Options,
        *,
        transport: httpx.BaseTransport | None = None,
        stop: threading.Event | None = None,
        say: Callable[[str], None] = logger.info,
    ) -> None:
        super().__init__(
            options,
            traitdeck_client(options.url, options.token, 10.0, transport=transport),
            Subscription(options.redis_url, pattern=options.pattern),
            stop=stop,
            say=say,
        )
        self.mapper = Mapper(options.agents or (), isolation_timeout_s=options.isolation_timeout_s)
        self.counts = Counts()
        self.buffer = RoundBuffer(options.buffer_events)
        #: The batch being posted (kept until Traitdeck takes it or refuses it for good).
        self.batch: list[dict[str, Any]] = []
        #: Mapping and the buffer are shared by the Redis thread and the poster.
        self.lock = threading.Lock()
        self.ready = threading.Event()
        #: Until the server has said which agents the policy has, messages wait here unmapped
        #: (an agent id mapped without them would land on the wrong agent).
        self.agents_known = options.agents is not None
        self.unmapped: list[tuple[str, bytes | str]] = []

    # --- Redis ----------------------------------------------------------------------------

    def handle(self, channel: str, payload: bytes | str) -> None:
        """One pub/sub message: map it, count it, queue its events (under ``lock``)."""
        if not self.agents_known:
            if len(self.unmapped) < MAX_PENDING:
                self.unmapped.append((channel, payload))
            return
        self.counts.envelopes += 1
        outcome = self.mapper.feed_message(channel, payload)
        if outcome.skipped is not None:
            self.counts.skipped += 1
            self.counts.reasons[outcome.skipped] += 1
            return
        self.counts.mapped += 1
        self.counts.inferred += outcome.inferred
        self.counts.events += len(outcome.events)
        self.counts.last_envelope_ms = int(time.time() * 1000)
        dropped = self.buffer.add(outcome.events)
        if dropped.rounds or dropped.events:
            first = self.counts.dropped_rounds == 0
            self.counts.dropped_rounds += dropped.rounds
            self.counts.dropped_events += dropped.events
            if first:
                self.say(
                    f"bridge: the buffer is full ({self.o.buffer_events} events): dropping the"
                    " oldest rounds whole; the stats line counts them"
                )
        if len(self.buffer) >= self.o.batch_size:
            self.ready.set()

    def waiting(self) -> int:
        """Events not yet stored: in the buffer, in the batch being posted, or unmapped."""
        return len(self.buffer) + len(self.batch) + len(self.unmapped)

    # --- HTTP -----------------------------------------------------------------------------

    def flush(self, *, final: bool = False) -> None:
        """Post the waiting events in batches; a transient failure keeps the batch for later
        (the Redis thread meanwhile goes on filling the buffer). ``final``: once more at exit,
        without waiting for a busy server."""
        while final or not self.stop.is_set():
            if not self.batch:
                with self.lock:
                    self.batch = self.buffer.take(self.o.batch_size)
                if not self.batch:
                    return
            wait = self._post(self.batch)
            if wait is not None:
                if not final:
                    self.stop.wait(wait)
                return
            with self.lock:
                self.buffer.done(self.batch)
            self.batch = []

    def _post(self, batch: list[dict[str, Any]]) -> float | None:
        """Post one batch: ``None`` when it is done with, else how long to wait to retry."""
        try:
            response = self.http.post(EVENTS_PATH, json={"events": batch})
        except httpx.HTTPError as exc:
            self._failures += 1
            self.say(f"bridge: cannot reach {self.o.url}: {exc or type(exc).__name__}; retrying")
            return BACKOFF[min(self._failures, len(BACKOFF)) - 1]
        status = response.status_code
        if status in (401, 403):
            raise Fatal(f"the server refused the token ({status}): {response.text[:200]}")
        if status in (429, 503) or status >= 500:
            self._failures += 1
            wait = _retry_after(response, BACKOFF[min(self._failures, len(BACKOFF)) - 1])
            self.say(f"bridge: the server answered {status}; retrying in {wait:g} s")
            return wait
        self._failures = 0
        if status != 200:
            self.counts.refused += len(batch)
            self.say(f"bridge: the server refused a batch ({status}): {response.text[:200]}")
            return None
        body = response.json()
        rejected = body.get("rejected") or []
        self.counts.posted += len(batch) - len(rejected)
        self.counts.refused += len(rejected)
        for item in rejected[:3]:
            self.say(f"bridge: an event was rejected: {item.get('error')}")
        return None

    _failures = 0

    def heartbeat(self) -> None:
        body = {
            "name": self.o.name,
            "last_envelope_ms": self.counts.last_envelope_ms,
            # The events held (buffered, being posted, unmapped): a gauge on /api/v1/metrics.
            "counts": {**self.counts.report(), "buffered": self.waiting()},
        }
        try:
            response = self.http.post(STATUS_PATH, json=body)
        except httpx.HTTPError:
            return
        if response.status_code in (401, 403):
            raise Fatal(f"the server refused the token ({response.status_code})")
        if response.status_code == 200 and self.o.agents is None:
            agents = response.json().get("agents")
            if isinstance(agents, list):
                self.mapper.set_agents([a for a in agents if isinstance(a, str)])
                with self.lock:
                    if not self.agents_known:
                        self.agents_known = True
                        waiting, self.unmapped = self.unmapped, []
                        for channel, payload in waiting:
                            self.handle(channel, payload)

    def stats_line(self, elapsed: float, since: Counts) -> str:
        c = self.counts
        rate = (c.envelopes - since.envelopes) / elapsed if elapsed > 0 else 0.0
        reasons = ", ".join(f"{r}: {n}" for r, n in c.reasons.most_common(4)) or "none"
        return (
            f"bridge: {rate:.1f} envelopes/s; {c.envelopes} envelopes, {c.mapped} mapped"
            f" ({c.events} events, {c.inferred} inferred), {c.skipped} skipped ({reasons});"
            f" {c.posted} posted, {c.refused} refused, {c.dropped_rounds} rounds dropped"
            f" ({c.dropped_events} events) by the full buffer; {self.waiting()} waiting"
        )

    def _handle_locked(self, channel: str, payload: bytes | str) -> None:
        with self.lock:
            self.handle(channel, payload)

    # --- the loop -------------------------------------------------------------------------

    def read_redis(self) -> None:
        """The Redis thread: read and map every message until ``stop``, reconnecting quickly.
        It also writes the stats line, so the log keeps counting while posting is blocked."""
        last_stats = time.monotonic()
        since = Counts()
        subscribed = f"bridge: subscribed to {self.o.pattern} on {redacted(self.o.redis_url)}"
        while not self.stop.is_set():
            now = time.monotonic()
            if now - last_stats >= self.o.stats_s:
                with self.lock:
                    line = self.stats_line(now - last_stats, since)
                    since = Counts(envelopes=self.counts.envelopes)
                self.say(line)
                last_stats = now
            wait = self.pump(0.2, self._handle_locked, subscribed=subscribed, name="bridge")
            if wait is not None:
                self.stop.wait(wait)
        self.subscription.close()

    def run(self) -> None:
        self.heartbeat()
        reader = threading.Thread(target=self.read_redis, name="bridge-redis", daemon=True)
        reader.start()
        last_flush = last_beat = last_ask = time.monotonic()
        try:
            while not self.stop.is_set():
                self.ready.wait(self.o.flush_s)
                self.ready.clear()
                now = time.monotonic()
                if len(self.buffer) >= self.o.batch_size or now - last_flush >= self.o.flush_s:
                    self.flush()
                    last_flush = time.monotonic()
                if not self.agents_known and now - last_ask >= 1.0:
                    self.heartbeat()  # ask again every second until the server answers
                    last_ask = now
                if now - last_beat >= self.o.stats_s:
                    last_beat = now
                    self.heartbeat()
        finally:
            self.stop.set()
            reader.join(timeout=5)
        self.flush(final=True)
        self.heartbeat()
        self.http.close()
