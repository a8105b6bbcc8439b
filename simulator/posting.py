"""Posting simulated rounds to a Traitdeck server over HTTP, as a runtime does (``simulate``).

Delivery works like a runtime's: a round's events are posted in time order, in a few batches
(the stream of each attempt, then ``generation.finished`` and the ordinary executions, then
``round.finished``), paced in real time so that one round takes about 1–3 s. Rounds start at a
given rate; they overlap when they last longer than that. A batch that fails for a transient
reason (connection, timeout, 5xx, 429) is re-posted as it was: ingest is idempotent by
``event_id``, so a re-post only counts duplicates.

The events go over HTTP and never through the channel layer: the in-memory layer reaches only the
consumers inside the server process (RECIPES "Channels").
"""

from __future__ import annotations

import heapq
import itertools
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import httpx

from core.vocabulary import GENERATION_FINISHED, ROUND_FINISHED, ROUND_KINDS
from simulator.runtime import Simulator

EVENTS_PATH: Final = "/api/v1/events"
WHOAMI_PATH: Final = "/api/v1/whoami"
CONFIG_PATH: Final = "/api/v1/agents/{agent}/config.yaml"
#: A round is delivered over this many real seconds: its simulated duration, clamped.
MIN_ROUND_S: Final = 1.0
MAX_ROUND_S: Final = 3.0
#: Waits before re-posting a batch after a transient failure.
RETRY_DELAYS: Final = (0.5, 1.0, 2.0, 4.0)
#: What a round shows on the live page (its chips), by the event type that shows it.
KINDS: Final = {kind.event_type: kind.chip for kind in ROUND_KINDS}
KIND_ORDER: Final = tuple(KINDS.values())


class Clock(Protocol):
    """What the pacing needs of :mod:`time` (tests pass a fake that only moves on sleep)."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float, /) -> None: ...


class Refused(Exception):
    """The run cannot go on: ``returncode`` 1 (the server said no) or 2 (could not run)."""

    def __init__(self, message: str, returncode: int = 1) -> None:
        super().__init__(message)
        self.returncode = returncode


class _Transient(Exception):
    """A failure worth re-posting for: connection, timeout, 5xx, 429 (``retry_after``: the
    seconds the server asked for, 503/429 with ``Retry-After``)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


#: The longest ``Retry-After`` honoured (a server asking for more is waited on this long).
MAX_RETRY_AFTER_S = 30.0


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "").strip()
    if not value.isdigit():
        return None
    return min(float(value), MAX_RETRY_AFTER_S)


# --- rounds and their batches --------------------------------------------------------------------


@dataclass
class _Flight:
    """One round being delivered."""

    agent: str
    turn_id: str
    iteration: int
    kinds: tuple[str, ...]
    outcome: str
    size: int
    batches_left: int
    posted_any: bool = False


@dataclass(order=True)
class _Batch:
    due: float
    seq: int
    flight: _Flight = field(compare=False)
    events: list[dict[str, Any]] = field(compare=False)


def plan_batches(events: Sequence[dict[str, Any]]) -> list[tuple[float, list[dict[str, Any]]]]:
    """Split a round's time-ordered events into batches, each with its real-time offset (s).

    A batch ends where the next attempt (a provider re-stream) begins, at
    ``generation.finished`` and at ``round.finished``: a runtime reports while it streams,
    after generation, and at the end. Offsets follow the simulated times, scaled so the round
    takes between :data:`MIN_ROUND_S` and :data:`MAX_ROUND_S`.
    """
    if not events:
        return []
    times = [_seconds(event["ts"]) for event in events]
    cuts = {0}
    seen_attempts = {events[0].get("attempt", 0)}
    for index, event in enumerate(events):
        attempt = event.get("attempt", 0)
        if attempt not in seen_attempts:
            seen_attempts.add(attempt)
            cuts.add(index)
        if event["type"] in (GENERATION_FINISHED, ROUND_FINISHED):
            cuts.add(index)
    bounds = [*sorted(cuts), len(events)]
    simulated = times[-1] - times[0]
    target = min(MAX_ROUND_S, max(MIN_ROUND_S, simulated))
    scale = target / simulated if simulated > 0 else 0.0
    return [
        ((times[start] - times[0]) * scale, list(events[start:end]))
        for start, end in itertools.pairwise(bounds)
        if end > start
    ]


def _seconds(ts: Any) -> float:
    """An event's ``ts`` (RFC 3339 as the simulator writes it, or epoch ms) in epoch seconds."""
    if isinstance(ts, int | float):
        return float(ts) / 1000
    return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()


def _kinds(events: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    found = {KINDS[event["type"]] for event in events if event["type"] in KINDS}
    return tuple(kind for kind in KIND_ORDER if kind in found)


# --- the HTTP side ------------------------------------------------------------------------------


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    text = " ".join(response.text.split())
    return text[:200] or response.reason_phrase


class Server:
    """One HTTP client for the whole run, as a runtime keeps one."""

    def __init__(
        self,
        base_url: str,
        token: str,
        transport: httpx.BaseTransport | None = None,
        *,
        clock: Clock,
    ) -> None:
        self.base_url = base_url
        self.clock = clock
        self.client = httpx.Client(
            transport=transport,
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": "traitdeck-simulator/1",
                "Accept": "application/json",
            },
            timeout=httpx.Timeout(10.0, connect=3.0),
            follow_redirects=False,
        )

    def close(self) -> None:
        self.client.close()

    def check(self) -> None:
        """Before the first round: the server answers and takes this token for events."""
        url = self.base_url + WHOAMI_PATH
        try:
            response = self.client.get(url)
        except httpx.HTTPError as exc:
            raise Refused(f"cannot reach the server at {self.base_url}: {_reason(exc)}", 2) from exc
        if response.status_code in (401, 403):
            raise Refused(
                f"the server refused the token ({response.status_code}): {_error_text(response)}"
            )
        body = _json_object(response)
        if response.status_code != 200 or body is None or "scopes" not in body:
            raise Refused(
                f"{self.base_url} does not look like a Traitdeck server "
                f"(GET {WHOAMI_PATH} answered {response.status_code})",
                2,
            )
        scopes = body.get("scopes") or []
        if body.get("kind") == "token" and "events:write" not in scopes:
            raise Refused(
                f"the token {body.get('name')!r} lacks the events:write scope "
                f"(it has: {', '.join(scopes) or 'none'})"
            )

    def fetch_config(self, agent: str) -> tuple[int, str, str | None]:
        """The agent's published runtime file, as a runtime fetches it: ``(status, text, hash)``
        with the ETag's hash (``None`` when the server sent none). Never raises for an HTTP
        status; an unreachable server is ``(0, reason, None)``."""
        url = f"{self.base_url}{CONFIG_PATH.format(agent=urllib.parse.quote(agent, safe=''))}"
        try:
            response = self.client.get(url, headers={"Accept": "application/yaml"})
        except httpx.HTTPError as exc:
            return 0, _reason(exc), None
        etag = response.headers.get("ETag")
        return response.status_code, response.text, etag.strip('"') if etag else None

    def post(self, events: list[dict[str, Any]], *, retries: Sequence[float]) -> dict[str, Any]:
        """Post one batch; re-post it after a transient failure, waiting ``retries`` between."""
        last = ""
        for wait in (*retries, None):
            try:
                return self._post_once(events)
            except _Transient as exc:
                last = str(exc)
                if wait is None:
                    break
                # A busy server (503) says when to come back: never sooner than it asked.
                self.clock.sleep(max(wait, exc.retry_after or 0.0))
        raise Refused(f"the server stopped answering: {last}")

    def _post_once(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            response = self.client.post(self.base_url + EVENTS_PATH, json={"events": events})
        except httpx.HTTPError as exc:
            raise _Transient(_reason(exc)) from exc
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Transient(f"{status} {_error_text(response)}", _retry_after(response))
        if status in (401, 403):
            raise Refused(f"the server refused the token ({status}): {_error_text(response)}")
        body = _json_object(response)
        if status != 200 or body is None or not isinstance(body.get("accepted"), int):
            raise Refused(f"the server refused a batch ({status}): {_error_text(response)}")
        return body


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host not found"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return str(exc) or type(exc).__name__


# --- pacing and counting -------------------------------------------------------------------------


@dataclass
class Totals:
    rounds: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    cut_short: int = 0
    reasons: set[str] = field(default_factory=set)


class Delivery:
    """One run's rounds on their way: started at ``rate`` per second, each batch posted when due,
    the answers counted in ``totals``. ``say`` gets a line per round delivered (unless ``quiet``),
    ``warn`` a line per distinct rejection and the trouble finishing after Ctrl-C."""

    def __init__(
        self,
        server: Server,
        totals: Totals,
        *,
        clock: Clock,
        quiet: bool,
        say: Callable[[str], None],
        warn: Callable[[str], None],
    ) -> None:
        self.server = server
        self.totals = totals
        self.clock = clock
        self.quiet = quiet
        self.say = say
        self.warn = warn

    def run(
        self,
        simulators: Sequence[tuple[str, Simulator]],
        limit: int | None,
        rate: float,
        *,
        refresh: Callable[[], Sequence[tuple[str, Simulator]] | None] | None = None,
        refresh_every: float = 10.0,
    ) -> None:
        """``refresh`` (called every ``refresh_every`` seconds, as a runtime polls its config)
        returns new simulators when the policy in force changed, else ``None``."""
        queue: list[_Batch] = []
        order = itertools.count()
        interval = 1.0 / rate
        started = 0
        next_start = self.clock.monotonic()
        next_refresh = next_start + refresh_every
        current: _Batch | None = None
        try:
            while True:
                more = limit is None or started < limit
                if more and (not queue or next_start <= queue[0].due):
                    self._sleep_until(next_start)
                    if refresh is not None and self.clock.monotonic() >= next_refresh:
                        next_refresh = self.clock.monotonic() + refresh_every
                        simulators = refresh() or simulators
                    _, simulator = simulators[started % len(simulators)]
                    self._launch(simulator, queue, order)
                    started += 1
                    # After a stall (a slow server, a suspended laptop) go on at the normal pace
                    # instead of starting a burst of overdue rounds.
                    next_start = max(next_start + interval, self.clock.monotonic() - interval)
                    continue
                if not queue:
                    return
                current = heapq.heappop(queue)
                self._sleep_until(current.due)
                self._deliver(current, retries=RETRY_DELAYS)
                current = None
        except KeyboardInterrupt:
            if current is not None:
                heapq.heappush(queue, current)
        self._finish_begun(queue)

    def _launch(self, simulator: Simulator, queue: list[_Batch], order: Iterator[int]) -> None:
        agent, events = simulator.next_round(datetime.now(UTC))
        batches = plan_batches(events)
        first = events[0]
        flight = _Flight(
            agent=agent,
            turn_id=first["turn_id"],
            iteration=first["iteration"],
            kinds=_kinds(events),
            outcome=str(events[-1].get("outcome", "?")),
            size=len(events),
            batches_left=len(batches),
        )
        now = self.clock.monotonic()
        for offset, chunk in batches:
            heapq.heappush(queue, _Batch(now + offset, next(order), flight, chunk))

    def _deliver(self, batch: _Batch, *, retries: Sequence[float]) -> None:
        totals = self.totals
        answer = self.server.post(batch.events, retries=retries)
        flight = batch.flight
        flight.posted_any = True
        totals.accepted += int(answer.get("accepted", 0))
        totals.duplicates += int(answer.get("duplicates", 0))
        rejected = answer.get("rejected") or []
        totals.rejected += len(rejected)
        for item in rejected:
            self._report_rejected(batch, item)
        flight.batches_left -= 1
        if flight.batches_left == 0:
            totals.rounds += 1
            totals.kinds.update(flight.kinds)
            if not self.quiet:
                self.say(
                    f"{flight.agent} {flight.turn_id}/{flight.iteration}:"
                    f" {', '.join(flight.kinds) or 'plain'}"
                    f" (outcome {flight.outcome}, {flight.size} events)"
                )

    def _report_rejected(self, batch: _Batch, item: Any) -> None:
        """One line per distinct reason (a replayed seed would repeat one reason many times)."""
        reason = str(item.get("error") if isinstance(item, dict) else item)
        if reason in self.totals.reasons:
            return
        self.totals.reasons.add(reason)
        index = item.get("index") if isinstance(item, dict) else None
        event: dict[str, Any] = {}
        if isinstance(index, int) and 0 <= index < len(batch.events):
            event = batch.events[index]
        flight = batch.flight
        line = (
            f"the server rejected a {event.get('type', '?')} event of {flight.agent}"
            f" {flight.turn_id}/{flight.iteration}: {reason}"
        )
        if "reused" in reason:
            line += " (this seed was already posted to this server: use another --seed)"
        self.warn(line)

    def _finish_begun(self, queue: list[_Batch]) -> None:
        """After Ctrl-C: post the rest of the rounds already begun at once, so none stays half
        reported; rounds not begun yet are dropped. A second Ctrl-C stops this too."""
        rest = sorted(batch for batch in queue if batch.flight.posted_any)
        queue.clear()
        try:
            for batch in rest:
                self._deliver(batch, retries=())
        except KeyboardInterrupt:
            pass
        except Refused as exc:
            self.warn(f"could not finish the rounds already begun: {exc}")
        self.totals.cut_short = len({id(b.flight) for b in rest if b.flight.batches_left > 0})

    def _sleep_until(self, moment: float) -> None:
        delay = moment - self.clock.monotonic()
        if delay > 0:
            self.clock.sleep(delay)
