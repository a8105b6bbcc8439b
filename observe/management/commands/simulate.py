"""``simulate``: post realistic rounds to a Traitdeck server over HTTP, exactly like a runtime.

The rounds come from :class:`simulator.runtime.Simulator` (the dry-run's pipeline) run
against the policy in force: each agent's published ``config.yaml``, fetched with the token like
a runtime does (the draft when nothing is published or the token lacks ``config:read``), one
simulator per agent so that each agent gets its own uploaded manifest. Each round carries the
file's hash as ``policy_hash`` (DESIGN §6) on ``round.started``.

Delivery (batches, real-time pacing, re-posts after a transient failure) is
:mod:`simulator.posting`'s: one round takes about 1–3 s, ``--rate`` is how many rounds start per
second, and rounds overlap when they last longer than that.

Exit codes (DESIGN §6): 0 done (also Ctrl-C or SIGTERM: the rounds already begun are finished
quickly, then the summary); 1 the policy has no agents or not the one named, or the server refused
(token, scope, a batch); 2 usage error, a URL that is not a Traitdeck server, or a server that
cannot be reached at start.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import logging
import os
import secrets
import signal
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, Final, NoReturn

import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.tools.resolution import agents_mapping
from policy.cli_commands import positive_int
from policy.domain.yaml_io import CLI_MAX_BYTES, agent_export_text, load_policy, split_header
from policy.selectors import draft_state, manifest_for
from simulator.posting import EVENTS_PATH, KIND_ORDER, Delivery, Refused, Server, Totals
from simulator.runtime import Simulator

TOKEN_ENV: Final = "TRAITDECK_TOKEN"
DEFAULT_ROUNDS: Final = 10
DEFAULT_RATE: Final = 0.5


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

        chosen = self._agents(options.get("agents") or [])
        # The clock is this module's ``time``, passed on so that tests can swap in a fake one.
        server = Server(base_url, token.strip(), self.transport, clock=time)
        try:
            server.check()
            simulators = self._simulators(chosen, seed, server)
            if not options.get("quiet"):
                agents = ", ".join(name for name, _ in simulators)
                amount = "until Ctrl-C" if limit is None else f"{limit} rounds"
                self._say(
                    f"simulating {agents} -> {base_url}{EVENTS_PATH}: {amount},"
                    f" {rate:g} rounds/s, seed {seed}"
                )
            totals = Totals()
            delivery = Delivery(
                server,
                totals,
                clock=time,
                quiet=bool(options.get("quiet")),
                say=self._say,
                warn=self.stderr.write,
            )
            in_force = {name: simulator.policy_hash(name) for name, simulator in simulators}
            generation = itertools.count(1)

            def refresh() -> list[tuple[str, Simulator]] | None:
                """The policy in force again, as a runtime polls its config.yaml: new
                simulators when an agent's published hash changed."""
                hashes = {name: server.fetch_config(name)[2] for name in chosen}
                if all(h is None or h == in_force.get(name) for name, h in hashes.items()):
                    return None
                renewed = self._simulators(chosen, seed + next(generation), server)
                for name, simulator in renewed:
                    in_force[name] = simulator.policy_hash(name)
                    self._say(f"agent {name}: the policy in force changed, now {in_force[name]}")
                return renewed

            try:
                with _sigterm_interrupts():
                    delivery.run(
                        simulators,
                        limit,
                        float(rate),
                        refresh=refresh if limit is None else None,
                    )
            finally:
                self._summary(totals)
        finally:
            server.close()
        if totals.rejected:
            raise Refused(f"the server rejected {totals.rejected} events (reasons above)")

    def _agents(self, wanted: Sequence[str]) -> list[str]:
        """The agents to simulate (all by default); refused before anything is posted."""
        names = draft_state().agents
        if not names:
            raise Refused("no agents in the policy")
        chosen = list(dict.fromkeys(wanted)) or names
        for name in chosen:
            if name not in names:
                raise Refused(
                    f"agent {name!r} is not in the policy (its agents: {', '.join(names)})"
                )
        return chosen

    def _simulators(
        self, chosen: Sequence[str], seed: int, server: Server
    ) -> list[tuple[str, Simulator]]:
        state = draft_state()
        keys = {str(key): key for key in agents_mapping(state.data)}
        out = []
        for name in chosen:
            data, policy_hash = self._policy_in_force(server, name, state.data, keys[name])
            simulator = Simulator(
                data,
                seed=_agent_seed(seed, name),
                agents=[name],
                manifest=manifest_for(name),
                policy_hashes={name: policy_hash} if policy_hash else None,
            )
            out.append((name, simulator))
        return out

    def _policy_in_force(
        self, server: Server, name: str, draft: Any, key: Any
    ) -> tuple[Any, str | None]:
        """What the runtime would run: the agent's published ``config.yaml`` fetched like a
        runtime (its ETag is the ``policy_hash`` reported), else the draft, said on stderr."""
        status, text, etag = server.fetch_config(name)
        if status == 200 and etag:
            loaded = load_policy(text, max_bytes=CLI_MAX_BYTES)
            if not loaded.refused:
                return loaded.data, etag
        reason = {
            404: "nothing published for it yet",
            403: "the token lacks the config:read scope",
        }.get(status, f"config.yaml answered {status or 'nothing'}")
        self.stderr.write(f"agent {name}: simulating the draft ({reason})")
        policy_hash, _ = split_header(agent_export_text(draft, key))
        return draft, policy_hash

    def _summary(self, totals: Totals) -> None:
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
