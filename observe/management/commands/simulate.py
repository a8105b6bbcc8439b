"""``simulate``: post realistic rounds to a Traitdeck server over HTTP, exactly like a runtime.

The rounds come from :class:`observe.domain.simulator.Simulator` (the real overseer, early gate
and ledger) run against the policy in force (the draft until versions exist), one simulator per
agent so that each agent gets its own uploaded manifest. Each round carries the agent's
``policy_hash`` (the ``# sha256:`` header of its per-agent export, DESIGN §6) on
``round.started``.

Delivery works like a runtime's: a round's events are posted in time order, in a few batches
(the stream of each attempt, then ``generation.finished`` and the ordinary executions, then
``round.finished``), paced in real time so that one round takes about 1–3 s. ``--rate`` is how
many rounds start per second; rounds overlap when they last longer than that. A batch that fails
for a transient reason (connection, timeout, 5xx, 429) is re-posted as it was: ingest is
idempotent by ``event_id``, so a re-post only counts duplicates.

The events go over HTTP and never through the channel layer: the in-memory layer reaches only the
consumers inside the server process (RECIPES "Channels").

Exit codes (DESIGN §6): 0 done (also Ctrl-C or SIGTERM: the rounds already begun are finished
quickly, then the summary); 1 the policy has no agents or not the one named, or the server refused
(token, scope, a batch); 2 usage error, a URL that is not a Traitdeck server, or a server that
cannot be reached at start.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import itertools
import logging
import os
import secrets
import signal
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import Any, Final, NoReturn

import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser

from observe.domain.events import (
    ACTION_REJECTED,
    GENERATION_FINISHED,
    LEDGER_DEDUP,
    ROUND_FINISHED,
    TOOL_EARLY_STARTED,
    TOOL_TIMEOUT,
)
from observe.domain.simulator import Simulator
from policy.domain.cli import positive_int
from policy.domain.resolution import agents_mapping
from policy.domain.yaml_io import agent_export_text, split_header
from policy.selectors import draft_state, manifest_for

EVENTS_PATH: Final = "/api/v1/events"
WHOAMI_PATH: Final = "/api/v1/whoami"
TOKEN_ENV: Final = "TRAITDECK_TOKEN"
DEFAULT_ROUNDS: Final = 10
DEFAULT_RATE: Final = 0.5
#: A round is delivered over this many real seconds: its simulated duration, clamped.
MIN_ROUND_S: Final = 1.0
MAX_ROUND_S: Final = 3.0
#: Waits before re-posting a batch after a transient failure.
RETRY_DELAYS: Final = (0.5, 1.0, 2.0, 4.0)
#: What a round shows on the live page, by the event type that shows it (the chips).
KINDS: Final = {
    ACTION_REJECTED: "rejected",
    TOOL_EARLY_STARTED: "early",
    LEDGER_DEDUP: "dedup",
    TOOL_TIMEOUT: "timeout",
}
KIND_ORDER: Final = tuple(KINDS.values())


class Refused(Exception):
    """The run cannot go on: ``returncode`` 1 (the server said no) or 2 (could not run)."""

    def __init__(self, message: str, returncode: int = 1) -> None:
        super().__init__(message)
        self.returncode = returncode


class _Transient(Exception):
    """A failure worth re-posting for: connection, timeout, 5xx, 429."""


# --- argument checks (each failure is a usage error: exit 2) ------------------------------------


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _base_url(url: str) -> str:
    """``URL`` without a trailing slash; it may carry a path prefix (a server behind a proxy)."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"--url must be an http:// or https:// URL with a host, got {url!r}", 2)
    if parts.query or parts.fragment:
        raise Refused(f"--url must not have a query or a fragment, got {url!r}", 2)
    try:
        _ = parts.port
    except ValueError:
        raise Refused(f"--url has an invalid port: {url!r}", 2) from None
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _agent_seed(seed: int, agent: str) -> int:
    """Each agent's own seed: independent of which other agents are simulated."""
    digest = hashlib.sha256(f"{seed}\x1f{agent}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


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


class _Server:
    """One HTTP client for the whole run, as a runtime keeps one."""

    def __init__(
        self, base_url: str, token: str, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.base_url = base_url
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
                time.sleep(wait)
        raise Refused(f"the server stopped answering: {last}")

    def _post_once(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            response = self.client.post(self.base_url + EVENTS_PATH, json={"events": events})
        except httpx.HTTPError as exc:
            raise _Transient(_reason(exc)) from exc
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Transient(f"{status} {_error_text(response)}")
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


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops the run like Ctrl-C does (``scripts/demo`` stops the simulator with it)."""

    def interrupt(signum: int, frame: FrameType | None) -> NoReturn:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- the command --------------------------------------------------------------------------------


@dataclass
class _Totals:
    rounds: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    cut_short: int = 0
    reasons: set[str] = field(default_factory=set)


class Command(BaseCommand):
    help = (
        "Post realistic simulated rounds (the real overseer, early gate and ledger on the current"
        " policy) to a Traitdeck server over HTTP, like a runtime. Exit 0 done (also after"
        " Ctrl-C), 1 no such agent or the server refused, 2 usage error or server unreachable."
    )

    #: Tests swap in an ``httpx.MockTransport``; ``None`` is real HTTP.
    transport: httpx.BaseTransport | None = None

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        from_command_line = parser.called_from_command_line

        # Usage errors exit 2 with one line, from a shell and from call_command alike.
        def error(message: str) -> NoReturn:
            if from_command_line:
                parser.exit(2, f"{parser.prog}: error: {message} (see --help)\n")
            raise CommandError(f"Error: {message}", returncode=2)

        parser.error = error  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--agent",
            dest="agents",
            action="append",
            metavar="A",
            help="simulate this agent of the policy (repeatable; default: every agent)",
        )
        how_long = parser.add_mutually_exclusive_group()
        how_long.add_argument(
            "--rounds",
            type=positive_int,
            metavar="N",
            help=f"post N rounds, then stop (default {DEFAULT_ROUNDS})",
        )
        how_long.add_argument(
            "--forever", action="store_true", help="post rounds until Ctrl-C or SIGTERM"
        )
        parser.add_argument(
            "--rate",
            type=_positive_float,
            default=DEFAULT_RATE,
            metavar="R",
            help=f"rounds started per second (default {DEFAULT_RATE}); a round lasts 1-3 s",
        )
        parser.add_argument(
            "--seed",
            type=int,
            metavar="S",
            help="the same seed gives the same rounds (default: a random seed, printed)",
        )
        parser.add_argument(
            "--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8000"
        )
        parser.add_argument(
            "--token",
            default=None,
            metavar="T",
            help=f"a runtime token with scope events:write (default: ${TOKEN_ENV})",
        )
        parser.add_argument(
            "--quiet", action="store_true", help="print only the summary, not one line per round"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        logging.getLogger("httpx").setLevel(logging.WARNING)
        try:
            self._handle(options)
        except Refused as exc:
            raise CommandError(str(exc), returncode=exc.returncode) from None
        except KeyboardInterrupt:  # before the first round: nothing to finish or summarize
            self.stderr.write("interrupted before the first round")

    def _handle(self, options: dict[str, Any]) -> None:
        rounds: int | None = options.get("rounds")
        forever = bool(options.get("forever"))
        if rounds is not None and forever:
            raise Refused("give either --rounds or --forever, not both", 2)
        if rounds is not None and (not isinstance(rounds, int) or rounds < 1):
            raise Refused("--rounds must be at least 1", 2)
        limit = None if forever else (rounds if rounds is not None else DEFAULT_ROUNDS)
        rate = options.get("rate", DEFAULT_RATE)
        if not isinstance(rate, int | float) or not 0 < rate < float("inf"):
            raise Refused("--rate must be a positive number", 2)
        url = options.get("url")
        if not url:
            raise Refused("--url is required", 2)
        base_url = _base_url(str(url))
        token = options.get("token") or os.environ.get(TOKEN_ENV, "")
        if not token.strip():
            raise Refused(f"give a runtime token with --token (or ${TOKEN_ENV})", 2)
        seed = options.get("seed")
        if seed is None:
            seed = secrets.randbelow(2**31)

        simulators = self._simulators(options.get("agents") or [], seed)
        server = _Server(base_url, token.strip(), self.transport)
        try:
            server.check()
            if not options.get("quiet"):
                agents = ", ".join(name for name, _ in simulators)
                amount = "until Ctrl-C" if limit is None else f"{limit} rounds"
                self._say(
                    f"simulating {agents} -> {base_url}{EVENTS_PATH}: {amount},"
                    f" {rate:g} rounds/s, seed {seed}"
                )
            totals = _Totals()
            try:
                with _sigterm_interrupts():
                    self._run(server, simulators, limit, float(rate), totals, options)
            finally:
                self._summary(totals)
        finally:
            server.close()
        if totals.rejected:
            raise Refused(f"the server rejected {totals.rejected} events (reasons above)")

    def _simulators(self, wanted: Sequence[str], seed: int) -> list[tuple[str, Simulator]]:
        state = draft_state()
        names = state.agents
        if not names:
            raise Refused("no agents in the policy")
        chosen = list(dict.fromkeys(wanted)) or names
        for name in chosen:
            if name not in names:
                raise Refused(
                    f"agent {name!r} is not in the policy (its agents: {', '.join(names)})"
                )
        keys = {str(key): key for key in agents_mapping(state.data)}
        out = []
        for name in chosen:
            policy_hash, _ = split_header(agent_export_text(state.data, keys[name]))
            simulator = Simulator(
                state.data,
                seed=_agent_seed(seed, name),
                agents=[name],
                manifest=manifest_for(name),
                policy_hashes={name: policy_hash} if policy_hash else None,
            )
            out.append((name, simulator))
        return out

    def _run(
        self,
        server: _Server,
        simulators: Sequence[tuple[str, Simulator]],
        limit: int | None,
        rate: float,
        totals: _Totals,
        options: dict[str, Any],
    ) -> None:
        quiet = bool(options.get("quiet"))
        queue: list[_Batch] = []
        order = itertools.count()
        interval = 1.0 / rate
        started = 0
        next_start = time.monotonic()
        current: _Batch | None = None
        try:
            while True:
                more = limit is None or started < limit
                if more and (not queue or next_start <= queue[0].due):
                    _sleep_until(next_start)
                    _, simulator = simulators[started % len(simulators)]
                    self._launch(simulator, queue, order)
                    started += 1
                    # After a stall (a slow server, a suspended laptop) go on at the normal pace
                    # instead of starting a burst of overdue rounds.
                    next_start = max(next_start + interval, time.monotonic() - interval)
                    continue
                if not queue:
                    return
                current = heapq.heappop(queue)
                _sleep_until(current.due)
                self._deliver(server, current, totals, quiet, retries=RETRY_DELAYS)
                current = None
        except KeyboardInterrupt:
            if current is not None:
                heapq.heappush(queue, current)
        self._finish_begun(server, queue, totals, quiet)

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
        now = time.monotonic()
        for offset, chunk in batches:
            heapq.heappush(queue, _Batch(now + offset, next(order), flight, chunk))

    def _deliver(
        self,
        server: _Server,
        batch: _Batch,
        totals: _Totals,
        quiet: bool,
        *,
        retries: Sequence[float],
    ) -> None:
        answer = server.post(batch.events, retries=retries)
        flight = batch.flight
        flight.posted_any = True
        totals.accepted += int(answer.get("accepted", 0))
        totals.duplicates += int(answer.get("duplicates", 0))
        rejected = answer.get("rejected") or []
        totals.rejected += len(rejected)
        for item in rejected:
            self._report_rejected(batch, item, totals)
        flight.batches_left -= 1
        if flight.batches_left == 0:
            totals.rounds += 1
            totals.kinds.update(flight.kinds)
            if not quiet:
                self._say(
                    f"{flight.agent} {flight.turn_id}/{flight.iteration}:"
                    f" {', '.join(flight.kinds) or 'plain'}"
                    f" (outcome {flight.outcome}, {flight.size} events)"
                )

    def _report_rejected(self, batch: _Batch, item: Any, totals: _Totals) -> None:
        """One line per distinct reason (a replayed seed would repeat one reason many times)."""
        reason = str(item.get("error") if isinstance(item, dict) else item)
        if reason in totals.reasons:
            return
        totals.reasons.add(reason)
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
        self.stderr.write(line)

    def _finish_begun(
        self, server: _Server, queue: list[_Batch], totals: _Totals, quiet: bool
    ) -> None:
        """After Ctrl-C: post the rest of the rounds already begun at once, so none stays half
        reported; rounds not begun yet are dropped. A second Ctrl-C stops this too."""
        rest = sorted(batch for batch in queue if batch.flight.posted_any)
        queue.clear()
        try:
            for batch in rest:
                self._deliver(server, batch, totals, quiet, retries=())
        except KeyboardInterrupt:
            pass
        except Refused as exc:
            self.stderr.write(f"could not finish the rounds already begun: {exc}")
        totals.cut_short = len({id(b.flight) for b in rest if b.flight.batches_left > 0})

    def _summary(self, totals: _Totals) -> None:
        kinds = ", ".join(f"{kind} {totals.kinds[kind]}" for kind in KIND_ORDER)
        line = (
            f"posted {totals.rounds} rounds (with {kinds});"
            f" events accepted {totals.accepted}, duplicates {totals.duplicates},"
            f" rejected {totals.rejected}"
        )
        if totals.cut_short:
            line += f"; {totals.cut_short} rounds left unfinished"
        self._say(line)

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()


def _sleep_until(moment: float) -> None:
    delay = moment - time.monotonic()
    if delay > 0:
        time.sleep(delay)
