"""Benchmark: a month of a busy deployment on PostgreSQL (issue 39). Run with `make bench-scale`
(``scripts/test-scale`` starts a throw-away PostgreSQL and sets ``DATABASE_URL``).

1. On the empty store (migrated: the day partitions of the last 30 days and a week ahead):
   every figure below.
2. Seeds ``SCALE_SEED_ROUNDS`` simulator rounds (the sample policy's agents, their tool mix,
   rejections, early starts, dedups and timeouts as the simulator makes them) through the real
   ingest, spread over one day 29 days ago, then multiplies them in SQL (``INSERT … SELECT`` of
   each round, its tool rows and its events with new ids, a new turn id, times shifted by whole
   days over the 30 days and by seconds within a day; new UUIDs for the events) up to each size
   of ``SCALE_SIZES`` (events), measuring every figure at each size: the size curve.
3. At the largest size, retention: the oldest day dropped (``rounds_prune``), disk before and
   after, and ingest again.

Figures: ingest events/s in process (``events_ingest``, batches of 1000 and 100, new rounds of
today); p99 of ``GET /api/v1/rounds`` with each filter, the round page, the history, the Tools
view and ``GET /api/v1/tools/health`` (24 h and 7 d) through Django's test client; reading the
newest 100k rounds and replaying them under two policies; bytes per event on disk (tables,
indexes, TOAST of rounds, tool rows, events and tallies ÷ events). ``BENCH_JSON=FILE`` merges
``"scale"`` into that file. Asserts nothing.

The copies keep their seed round's assembly (its marks' times are the seed's): the pages, the
tallies and the replay read rows of the right shape and number, not of the right times.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SIZES = [
    int(s) for s in os.environ.get("SCALE_SIZES", "1000000,10000000,30000000,100000000").split(",")
]
#: ``SCALE_SIZES=0``: the per-worker ingest stage alone (a minute; ``make bench-scale`` or
#: ``DATABASE_URL=postgres://… python tests/bench/bench_scale.py`` on a migrated database).
WORKERS_ONLY = SIZES == [0]
SEED_ROUNDS = int(os.environ.get("SCALE_SEED_ROUNDS", "4000"))
#: Requests per page figure (p99 of these: with 200 the second slowest; of 40 it was the slowest,
#: one pause of the machine).
REQUESTS = int(os.environ.get("SCALE_REQUESTS", "200"))
DAYS = 30
#: The seed's rounds span this many hours; its copies are shifted by whole days.
SEED_HOURS = 20
#: The live harness at each size (``SCALE_LIVE=0`` leaves it out: ~40 s a size).
LIVE = os.environ.get("SCALE_LIVE", "1") != "0"
LIVE_P99_MS = 250.0
PAGE_P99_MS, REPLAY_S, DROP_S, INGEST_SHARE = 100.0, 10.0, 1.0, 0.9


def setup(any_database: bool = False) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1")
    if not any_database and not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("bench-scale needs DATABASE_URL=postgres://… (make bench-scale)")
    import django

    django.setup()
    import logging

    from django.core.management import call_command

    # The live stage's thousands of POSTs, one log line each at INFO, were most of the bench's
    # output (``make bench``'s own main quiets them the same way).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # The server's process as daphne loads it: its collector settings (config/asgi.py: a young
    # generation of 10,000 and the startup heap frozen). Without them a full collection walks
    # every object of Django and the bench (~200k) in 80-100 ms, and the p99 of 40 requests of
    # a page was that pause, not the page.
    import config.asgi  # noqa: F401

    call_command("migrate", verbosity=0)


def sql(statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


#: The server settings every figure depends on, printed first and kept in ``BENCH_JSON``.
SERVER_SETTINGS = (
    "server_version",
    "shared_buffers",
    "max_wal_size",
    "checkpoint_timeout",
    "maintenance_work_mem",
    "work_mem",
    "fsync",
    "synchronous_commit",
)


def server_settings() -> dict[str, str]:
    """The server's settings of :data:`SERVER_SETTINGS`, as ``SHOW`` gives them."""
    settings = {name: str(sql(f"SHOW {name}")[0][0]) for name in SERVER_SETTINGS}
    print("PostgreSQL:", ", ".join(f"{name} {value}" for name, value in settings.items()))
    return settings


def store_events() -> int:
    return int(sql("SELECT count(*) FROM observe_event")[0][0])


def store_bytes() -> int:
    """Tables, indexes and TOAST of every partition of rounds, tool rows and events, and the
    tallies."""
    return int(
        sql(
            "SELECT sum(pg_total_relation_size(relid)) FROM (SELECT relid FROM"
            " pg_partition_tree('observe_round') UNION ALL SELECT relid FROM"
            " pg_partition_tree('observe_roundtool') UNION ALL SELECT relid FROM"
            " pg_partition_tree('observe_event')) AS parts"
        )[0][0]
    ) + int(sql("SELECT pg_total_relation_size('observe_toolhealthbucket')")[0][0])


# --- generation -----------------------------------------------------------------------------------


def simulated(count: int, start: datetime, spacing: float) -> list[dict[str, Any]]:
    """``count`` simulator rounds from ``start``, each event with a new id (the simulator's
    ids repeat with its seed)."""
    from tests.bench.bench_observe import rounds

    out: list[dict[str, Any]] = []
    for number, events in enumerate(rounds(39, start, spacing)):
        if number == count:
            return out
        for event in events:
            event["event_id"] = str(uuid.uuid4())
        out.extend(events)
    return out


def ingest(events: list[dict[str, Any]], batch: int) -> float:
    """events/s of ``events_ingest`` over ``events`` in batches."""
    from observe.services import events_ingest

    started = time.perf_counter()
    for first in range(0, len(events), batch):
        events_ingest(events[first : first + batch])
    return len(events) / (time.perf_counter() - started)


def seed(base_day: datetime) -> tuple[int, int, int]:
    """The seed rounds through the real ingest; (their round ids from, up to, events)."""
    low = int(sql("SELECT COALESCE(max(id), 0) FROM observe_round")[0][0])
    events = simulated(SEED_ROUNDS, base_day, SEED_HOURS * 3600 / SEED_ROUNDS)
    for event in events:
        event["turn_id"] = f"s-{event['turn_id']}"
    started = time.perf_counter()
    ingest(events, 1000)
    took = time.perf_counter() - started
    print(f"seed: {len(events):,} events of {SEED_ROUNDS:,} rounds ingested in {took:.1f} s")
    top = sql("SELECT max(id) FROM observe_round")[0][0]
    return low, int(top), len(events)


def multiply(base_low: int, base_top: int, stride: int, first: int, last: int) -> None:
    """Copies ``first``..``last`` of the seed rounds (ids ``base_low`` < id ≤ ``base_top``): copy
    ``c`` is shifted
    by ``c %% 30`` days (backwards from the seed's day is forwards: the seed lies 29 days ago) and
    ``c // 30`` seconds."""
    shift = "make_interval(days => c %% 30, secs => c / 30)"
    sql(
        "INSERT INTO observe_round (id, agent, turn_id, iteration, started_at, finished_at,"
        " generation_finished_at, outcome, policy_hash, max_actions, agent_in_policy, actions,"
        " rejections, early_starts, dedups, timeouts, assembly, drift, drift_notes, version,"
        " updated_at, day, before_start)"
        f" SELECT r.id + c * {stride}, r.agent, r.turn_id || '-' || c, r.iteration,"
        f" r.started_at + {shift}, r.finished_at + {shift}, r.generation_finished_at + {shift},"
        " r.outcome, r.policy_hash, r.max_actions, r.agent_in_policy, r.actions, r.rejections,"
        " r.early_starts, r.dedups, r.timeouts, r.assembly, r.drift, r.drift_notes,"
        f" r.version + c * {stride}, r.updated_at, r.day + c %% 30, r.before_start"
        " FROM observe_round r CROSS JOIN generate_series(%s, %s) AS c"
        " WHERE r.id > %s AND r.id <= %s",
        [first, last, base_low, base_top],
    )
    sql(
        "INSERT INTO observe_roundtool (round_id, tool_id, day)"
        f" SELECT t.round_id + c * {stride}, t.tool_id, t.day + c %% 30"
        " FROM observe_roundtool t CROSS JOIN generate_series(%s, %s) AS c"
        " WHERE t.round_id > %s AND t.round_id <= %s",
        [first, last, base_low, base_top],
    )
    sql(
        "INSERT INTO observe_event (event_id, round_id, type, ts, data, day)"
        f" SELECT gen_random_uuid(), e.round_id + c * {stride}, e.type, e.ts + {shift}, e.data,"
        " e.day + c %% 30 FROM observe_event e CROSS JOIN generate_series(%s, %s) AS c"
        " WHERE e.round_id > %s AND e.round_id <= %s",
        [first, last, base_low, base_top],
    )
    # The copies' round counts, as ingest keeps them (observe.round_counts).
    sql(
        "INSERT INTO observe_roundcountbucket (agent, minute, rounds, rejections, early_starts,"
        " dedups, timeouts, with_rejections, with_early_starts, with_dedups, with_timeouts)"
        f" SELECT r.agent, date_trunc('minute', r.started_at + {shift}), count(*),"
        " sum(r.rejections), sum(r.early_starts), sum(r.dedups), sum(r.timeouts),"
        " count(*) FILTER (WHERE r.rejections > 0), count(*) FILTER (WHERE r.early_starts > 0),"
        " count(*) FILTER (WHERE r.dedups > 0), count(*) FILTER (WHERE r.timeouts > 0)"
        " FROM observe_round r CROSS JOIN generate_series(%s, %s) AS c"
        " WHERE r.id > %s AND r.id <= %s GROUP BY 1, 2"
        " ON CONFLICT (agent, minute) DO UPDATE SET "
        + ", ".join(
            f"{name} = observe_roundcountbucket.{name} + excluded.{name}"
            for name in (
                "rounds",
                "rejections",
                "early_starts",
                "dedups",
                "timeouts",
                "with_rejections",
                "with_early_starts",
                "with_dedups",
                "with_timeouts",
            )
        ),
        [first, last, base_low, base_top],
    )


def grow_tallies(base_day: datetime) -> None:
    """The seed's tallies shifted onto each day of the month (the copies' calls, roughly)."""
    sql(
        "INSERT INTO observe_toolhealthbucket (agent, tool_id, span, bucket, tally)"
        " SELECT agent, tool_id, span, bucket + make_interval(days => d), tally"
        " FROM observe_toolhealthbucket CROSS JOIN generate_series(1, %s) AS d"
        " WHERE bucket < %s ON CONFLICT DO NOTHING",
        [DAYS - 1, base_day + timedelta(days=1)],
    )


def after_growth() -> None:
    from django.db import connection

    top = sql("SELECT max(version) FROM observe_round")[0][0] or 0
    sql("UPDATE observe_streamcounter SET value = GREATEST(value, %s)", [top])
    sql("SELECT setval('observe_round_id_seq', (SELECT max(id) FROM observe_round))")
    # A month's store was vacuumed and checkpointed as it grew: the copies' tens of millions of
    # fresh rows are, before anything is measured (else autovacuum's first pass over them and
    # the checkpointer race the figures). Its time is printed apart from the generation's.
    started = time.perf_counter()
    connection.cursor().execute("VACUUM (ANALYZE)")
    done = "VACUUM (ANALYZE), CHECKPOINT"
    try:
        connection.cursor().execute("CHECKPOINT")  # scripts/test-scale grants pg_checkpoint
    except Exception as exc:  # a server without that role: the figures say so
        done = f"VACUUM (ANALYZE); CHECKPOINT refused ({exc})"
    print(f"settled ({done}) in {time.perf_counter() - started:.0f} s")


# --- figures --------------------------------------------------------------------------------------


def p99(fn: Callable[[], Any], count: int = REQUESTS) -> float:
    fn()  # warm
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 1)


class Clients:
    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from accounts.roles import role_set
        from accounts.tokens import runtime_token_create

        user = get_user_model().objects.create_user(f"v-{secrets.token_hex(3)}", password="x")
        role_set(user, "viewer")
        self.page = Client()
        self.page.force_login(user)
        token = runtime_token_create(name=f"scale-{secrets.token_hex(3)}", scopes=["events:read"])
        self.api = Client(headers={"Authorization": f"Bearer {token.secret}"})

    def get(self, client: Any, url: str) -> Callable[[], Any]:
        def call() -> Any:
            response = client.get(url)
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}")
            return response

        return call


def pages(clients: Clients) -> dict[str, float]:
    from observe.models import Round, RoundTool

    newest = Round.objects.order_by("-started_at", "-id").first()
    agent = newest.agent if newest else "main"
    tool = RoundTool.objects.values_list("tool_id", flat=True).first() or "x"
    since = (datetime.now(UTC) - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    filters = {
        "all": "",
        "agent": f"agent={agent}",
        "has=rejection": "has=rejection",
        "has=early": "has=early",
        "has=dedup": "has=dedup",
        "has=timeout": "has=timeout",
        "tool": f"tool={tool}",
        "since": f"since={since}",
    }
    out = {
        f"rounds {name}": p99(clients.get(clients.api, f"/api/v1/rounds?{query}"))
        for name, query in filters.items()
    }
    if newest is not None:
        url = f"/live/rounds/{newest.agent}/{newest.turn_id}/{newest.iteration}/"
        out["round page"] = p99(clients.get(clients.page, url))
    out["history"] = p99(clients.get(clients.page, "/live/history/"))
    out["tools view"] = p99(clients.get(clients.page, "/live/tools/"))
    out["tools/health 24h"] = p99(clients.get(clients.api, "/api/v1/tools/health"))
    out["tools/health 7d"] = p99(clients.get(clients.api, "/api/v1/tools/health?since=7d"))
    return out


def replay_newest() -> dict[str, float]:
    from engine.replay.draft_impact import replay
    from observe.recorded_impact import stored_rounds
    from observe.selectors import RoundFilter
    from tests.engine.test_draft_impact import LAUNCH_EXPLORES, SAMPLE, resolution

    old, new = resolution(SAMPLE), resolution(LAUNCH_EXPLORES)
    started = time.perf_counter()
    rounds = list(stored_rounds(RoundFilter(), 100_000))
    read = time.perf_counter() - started
    replay(rounds, baseline=lambda agent: old, candidate=lambda agent: new)
    return {
        "replay_rounds": len(rounds),
        "replay_read_s": round(read, 2),
        "replay_s": round(time.perf_counter() - started, 2),
    }


def ingest_rates(
    batches: tuple[tuple[int, int], ...] = ((1000, 20_000), (100, 5_000)),
) -> dict[str, int]:
    """This process's ingest rates of new rounds of the last hour into its store: for each
    ``(batch, count)``, ``count`` new events in batches (after 1000 to warm connections and
    caches)."""
    out = {}
    for batch, count in batches:
        start = datetime.now(UTC) - timedelta(minutes=50)
        events = simulated(count // 9 + 50, start, 0.5)[: count + 1000]
        tag = secrets.token_hex(3)
        for event in events:
            event["turn_id"] = f"i{tag}-{event['turn_id']}"
        ingest(events[:1000], batch)  # warm: connections, caches
        out[f"ingest_{batch}"] = round(ingest(events[1000:], batch))
    return out


def ingest_process(url: str) -> dict[str, int]:
    """:func:`ingest_rates` in a process of its own (its own Django) on the store at ``url``."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--ingest"],
        env={**os.environ, "DATABASE_URL": url},
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    rates: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return rates


#: Passes of the ingest figures, each store in turn.
INGEST_PASSES = 3


def ingest_figures(reference: Reference) -> dict[str, Any]:
    """Ingest into this store beside the same ingest into an empty one on the same server, in
    alternating passes (a process each), best of :data:`INGEST_PASSES` each: this VM's speed
    drifts by 20-30 %% within an hour, so the empty store's figure measured at the start of the
    run compared the last size with another machine. ``reference`` is emptied first."""
    url = os.environ["DATABASE_URL"]
    empty_url = reference.fresh()
    passes: dict[str, list[dict[str, int]]] = {"store": [], "empty": []}
    for _ in range(INGEST_PASSES):
        passes["store"].append(ingest_process(url))
        passes["empty"].append(ingest_process(empty_url))
    best = {
        side: {name: max(run[name] for run in runs) for name in runs[0]}
        for side, runs in passes.items()
    }
    return {**best["store"], "empty_store": best["empty"], "ingest_passes": passes}


class Reference:
    """An empty store on the bench's server beside its own (a database made from a migrated
    template with the month's partitions), for figures measured beside the store's."""

    def __init__(self, base_day: datetime) -> None:
        from django.db import connection

        self.url = os.environ["DATABASE_URL"]
        name = connection.settings_dict["NAME"]
        self.template, self.name = f"{name}_empty_template", f"{name}_empty"
        for database in (self.name, self.template):
            sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        sql(f'CREATE DATABASE "{self.template}"')
        env = {**os.environ, "DATABASE_URL": self._url(self.template)}
        subprocess.run(
            [sys.executable, str(Path(__file__)), "--partitions", base_day.isoformat()],
            env=env,
            check=True,
        )

    def _url(self, database: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{database}"))

    def fresh(self) -> str:
        """The empty store's URL, made again from the template."""
        sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        sql(f'CREATE DATABASE "{self.name}" TEMPLATE "{self.template}"')
        return self._url(self.name)

    def close(self) -> None:
        for database in (self.name, self.template):
            sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def month_partitions(base_day: datetime) -> None:
    """The partitions of the month the store is grown over, and today's upkeep days."""
    from observe.partitions import partitions_ensure, upkeep_days

    partitions_ensure([base_day.date() + timedelta(days=d) for d in range(DAYS + 1)])
    partitions_ensure(upkeep_days(datetime.now(UTC).date()))


def worker(tag: str, batch: int, count: int) -> None:
    """``--worker``: this process's ingest rate of ``count`` new events in batches (its own
    rounds, named by ``tag``), printed as one number: the per-worker figure."""
    setup(any_database=True)
    start = datetime.now(UTC) - timedelta(minutes=40)
    events = simulated(count // 9 + 50, start, 0.5)[:count]
    for event in events:
        event["turn_id"] = f"w{tag}-{event['turn_id']}"
    ingest(events[:1000], batch)  # warm: connections, caches
    print(round(ingest(events[1000:], batch)))


def workers(count: int, env: dict[str, str], batch: int = 1000, events: int = 20_000) -> list[int]:
    """events/s of ``count`` ingest processes started together (each its own Django)."""
    command = [sys.executable, str(Path(__file__)), "--worker"]
    runs = [
        subprocess.Popen(
            [*command, f"{secrets.token_hex(3)}", str(batch), str(events)],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    return [int(run.communicate()[0].strip().splitlines()[-1]) for run in runs]


def sqlite_store(path: Path) -> dict[str, str]:
    """A fresh, migrated SQLite file's environment."""
    sqlite = {"DATABASE_URL": f"sqlite:///{path}"}
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--verbosity", "0"],
        env={**os.environ, **sqlite},
        check=True,
    )
    return sqlite


def interleaved(sqlite: dict[str, str], postgresql: dict[str, str]) -> dict[str, Any]:
    """One worker on each store in turn, best of three each: this VM's speed drifts by 20-30 %
    within an hour, and SQLite's passes all before PostgreSQL's compared two different
    machines."""
    passes: dict[str, list[int]] = {"sqlite_1": [], "postgresql_1": []}
    for _ in range(3):
        passes["sqlite_1"].append(workers(1, sqlite)[0])
        passes["postgresql_1"].append(workers(1, postgresql)[0])
    out: dict[str, Any] = {name: max(rates) for name, rates in passes.items()}
    out["passes"] = passes
    return out


#: Events stored in both stores before the per-worker figures "at size": SQLite's ingest slows
#: as its file grows (its commit writes every page the batch's random event ids touched in
#: the one unique index), PostgreSQL's day partition does not.
WORKERS_FILL = int(os.environ.get("SCALE_WORKERS_FILL", "200000"))


def worker_figures(tmp: Path, reference: Reference | None = None) -> dict[str, Any]:
    """Per-worker ingest on SQLite (a fresh file) and on this PostgreSQL, and two PostgreSQL
    workers at once, in the same run (processes of their own, in-process ingest); then, with
    ``reference``, one worker on each again once both hold :data:`WORKERS_FILL` events (a
    fresh file, the empty store made again)."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    out = interleaved(sqlite_store(tmp / "workers.sqlite3"), {})
    passes = out["passes"]
    two = max((workers(2, {}) for _ in range(2)), key=sum)
    out["postgresql_2"] = sum(two)
    out["postgresql_2_each"] = two
    out["two_vs_one"] = round(out["postgresql_2"] / out["postgresql_1"], 2)
    print(
        f"--- ingest per worker (batches of 1000): SQLite {out['sqlite_1']:,} ev/s,"
        f" PostgreSQL {out['postgresql_1']:,} ev/s; two PostgreSQL workers"
        f" {out['postgresql_2']:,} ev/s ({out['two_vs_one']}×); passes, interleaved:"
        f" SQLite {passes['sqlite_1']}, PostgreSQL {passes['postgresql_1']}"
    )
    if reference is not None and WORKERS_FILL:
        sqlite = sqlite_store(tmp / "filled.sqlite3")
        postgresql = {"DATABASE_URL": reference.fresh()}
        for env in (sqlite, postgresql):
            workers(1, env, events=WORKERS_FILL)
        filled = interleaved(sqlite, postgresql)
        out["filled"] = {"events": WORKERS_FILL, **filled}
        print(
            f"--- ingest per worker with {WORKERS_FILL:,} events stored: SQLite"
            f" {filled['sqlite_1']:,} ev/s, PostgreSQL {filled['postgresql_1']:,} ev/s;"
            f" passes: SQLite {filled['passes']['sqlite_1']},"
            f" PostgreSQL {filled['passes']['postgresql_1']}"
        )
    return out


def live_figures() -> dict[str, Any]:
    """``make bench``'s live harness (10 viewers, 1,000 events/s for 20 s, sequence-checked)
    against a daphne on this PostgreSQL store. The previous size's live rounds are deleted
    first: the harness posts the same rounds each time."""
    from tests.bench import bench_observe

    class Live(bench_observe.Bench):
        def __init__(self) -> None:  # this store, not a SQLite file of its own
            self.workdir = Path(tempfile.mkdtemp(prefix="traitdeck-scale-live-"))
            self.port = bench_observe._free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver"}
            self.process = None

    bench_observe.stored_live_rounds().delete()  # the previous size's
    bench = Live()
    bench.start()
    try:
        token, cookie = bench.token("events:write"), bench.session_cookie()
        return asyncio.run(bench_observe.live(bench, cookie, token))
    except Exception as exc:  # a figure missing, not the run
        return {"error": repr(exc)}
    finally:
        bench.stop()


def figures(clients: Clients, label: str, reference: Reference) -> dict[str, Any]:
    started = time.perf_counter()
    out: dict[str, Any] = {"events": store_events()}
    out.update(ingest_figures(reference))
    out["pages_p99_ms"] = pages(clients)
    out.update(replay_newest())
    if LIVE:
        out["live"] = live_figures()
    out["bytes"] = store_bytes()
    # Over the events stored when the bytes are measured (the figures above ingest some: on the
    # empty store those are all there is).
    out["bytes_per_event"] = round(out["bytes"] / max(store_events(), 1), 1)
    took = time.perf_counter() - started
    print(f"--- {label}: {out['events']:,} events (measured in {took:.0f} s)")
    print(
        f"  ingest 1000: {out['ingest_1000']:,} ev/s, 100: {out['ingest_100']:,} ev/s"
        f" (an empty store beside it: {out['empty_store']['ingest_1000']:,},"
        f" {out['empty_store']['ingest_100']:,});"
        f" replay of the newest {out['replay_rounds']:,}: {out['replay_s']} s"
        f" (reading {out['replay_read_s']} s); {out['bytes_per_event']} bytes/event"
    )
    print("  p99 ms: " + ", ".join(f"{k} {v}" for k, v in out["pages_p99_ms"].items()))
    if LIVE:
        print(f"  live: {out['live']}")
    return out


def seed_start() -> datetime:
    """When the seed starts: :data:`DAYS` - 1 days before its last copy, which ends now (or
    at today's midnight plus :data:`SEED_HOURS`, when that is past). Starting at the first
    day's midnight, the last copy ran until 20:00 today: at 100M events ~79k rounds started
    later than now, which ingest never stores (a ``ts`` past the clock skew is refused), and
    the live view's "rounds of the last minute" read every one of them on each catch-up."""
    now = datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return min(midnight, now - timedelta(hours=SEED_HOURS)) - timedelta(days=DAYS - 1)


def retention(base_day: datetime, reference: Reference) -> dict[str, Any]:
    from observe.partitions import partition_days
    from observe.services import rounds_prune

    oldest = partition_days()[0]
    before = store_bytes()
    # A whole day at least: when the seed starts after the first day's midnight, that day's
    # partition holds only its last hours, and the next day goes with it.
    whole = base_day == base_day.replace(hour=0, minute=0, second=0, microsecond=0)
    last = oldest if whole else oldest + timedelta(days=1)
    cutoff = datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    started = time.perf_counter()
    dropped = rounds_prune(older_than=cutoff)
    took = time.perf_counter() - started
    after = store_bytes()
    rate = ingest_figures(reference)
    print(
        f"--- retention: {oldest}..{last} dropped ({dropped:,} rounds) in {took:.3f} s;"
        f" disk {before / 1e9:.2f} → {after / 1e9:.2f} GB; ingest after: {rate}"
    )
    return {
        "day": oldest.isoformat(),
        "last_day": last.isoformat(),
        "rounds": dropped,
        "drop_s": round(took, 3),
        "bytes_before": before,
        "bytes_after": after,
        "ingest_after": {name: rate[name] for name in ("ingest_1000", "ingest_100")},
        "ingest_after_empty_store": rate["empty_store"],
    }


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def main() -> None:
    setup()
    server = server_settings()
    if WORKERS_ONLY:
        with tempfile.TemporaryDirectory() as tmp:
            per_worker = worker_figures(Path(tmp))
        out = os.environ.get("BENCH_JSON")
        if out:
            from tests.bench.bench_policy import merge_json

            merge_json(out, "scale", {"server": server, "workers": per_worker})
        return
    base_day = seed_start()
    month_partitions(base_day)
    reference = Reference(base_day)
    try:
        measure(base_day, server, reference)
    finally:
        reference.close()


def measure(base_day: datetime, server: dict[str, str], reference: Reference) -> None:
    clients = Clients()
    curve: dict[str, Any] = {"empty": figures(clients, "empty store", reference)}
    with tempfile.TemporaryDirectory() as tmp:
        per_worker = worker_figures(Path(tmp), reference)
    base_low, base_top, base_events = seed(base_day)
    # Past every id and version stored at the seed: copy c's ids and versions are c strides on.
    stride = int(sql("SELECT GREATEST(max(id), max(version)) FROM observe_round")[0][0]) + 1
    grow_tallies(base_day)
    made, copies = base_events, 0
    generation_s = 0.0
    for size in SIZES:
        started = time.perf_counter()
        while made < size:
            step = max(1, min(60, (size - made) // base_events))
            multiply(base_low, base_top, stride, copies + 1, copies + step)
            copies += step
            made += step * base_events
        after_growth()
        took = time.perf_counter() - started
        generation_s += took
        rate = made / max(generation_s, 1e-9)
        print(f"grown to {made:,} events in {took:.0f} s ({rate:,.0f} ev/s overall)")
        curve[str(size)] = figures(clients, f"{size:,} events", reference)
    drop = retention(base_day, reference)
    empty, full = curve["empty"], curve[str(SIZES[-1])]
    worst_page = max(full["pages_p99_ms"].values())
    scale = {
        "server": server,
        "sizes": curve,
        "generation_s": round(generation_s, 1),
        "generation_events_per_s": round(made / max(generation_s, 1e-9)),
        "retention": drop,
        "workers": per_worker,
        "targets": {
            "ingest_1000": [
                full["ingest_1000"],
                f"≥ {INGEST_SHARE:.0%} of an empty store's beside it"
                f" ({full['empty_store']['ingest_1000']}; the run's first, empty:"
                f" {empty['ingest_1000']})",
                verdict(full["ingest_1000"] >= INGEST_SHARE * full["empty_store"]["ingest_1000"]),
            ],
            "ingest_100": [
                full["ingest_100"],
                f"≥ {INGEST_SHARE:.0%} of an empty store's beside it"
                f" ({full['empty_store']['ingest_100']}; the run's first, empty:"
                f" {empty['ingest_100']})",
                verdict(full["ingest_100"] >= INGEST_SHARE * full["empty_store"]["ingest_100"]),
            ],
            "pages_p99_ms": [worst_page, f"≤ {PAGE_P99_MS:g}", verdict(worst_page <= PAGE_P99_MS)],
            "replay_s": [
                full["replay_s"],
                f"≤ {REPLAY_S:g}",
                verdict(full["replay_s"] <= REPLAY_S),
            ],
            "postgresql_vs_sqlite_ingest": [
                per_worker["postgresql_1"],
                f"≥ SQLite's {per_worker['sqlite_1']}",
                verdict(per_worker["postgresql_1"] >= per_worker["sqlite_1"]),
            ],
            **(
                {
                    "postgresql_vs_sqlite_ingest_filled": [
                        per_worker["filled"]["postgresql_1"],
                        f"≥ SQLite's {per_worker['filled']['sqlite_1']}"
                        f" ({WORKERS_FILL:,} events stored in each)",
                        verdict(
                            per_worker["filled"]["postgresql_1"] >= per_worker["filled"]["sqlite_1"]
                        ),
                    ]
                }
                if "filled" in per_worker
                else {}
            ),
            "two_workers": [
                per_worker["two_vs_one"],
                "≥ 1.3× one",
                verdict(per_worker["two_vs_one"] >= 1.3),
            ],
            "live_p99_ms": [
                full.get("live", {}).get("p99_ms"),
                f"≤ {LIVE_P99_MS:g}, 0 lost",
                verdict(
                    LIVE
                    and full["live"].get("p99_ms", 1e9) <= LIVE_P99_MS
                    and full["live"].get("lost") == 0
                ),
            ],
            "drop_s": [drop["drop_s"], f"≤ {DROP_S:g}", verdict(drop["drop_s"] <= DROP_S)],
            "ingest_after_drop": [
                drop["ingest_after"]["ingest_1000"],
                f"≥ {INGEST_SHARE:.0%} of before",
                verdict(drop["ingest_after"]["ingest_1000"] >= INGEST_SHARE * full["ingest_1000"]),
            ],
        },
    }
    print("=== scale: figure, measured, target, verdict")
    for name, (value, target, ok) in scale["targets"].items():
        print(f"  {name}: {value} (target {target}) {ok}")
    out = os.environ.get("BENCH_JSON")
    if out:
        from tests.bench.bench_policy import merge_json

        merge_json(out, "scale", scale)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1:2] == ["--ingest"]:  # ingest_process
        setup()
        print(json.dumps(ingest_rates()))
    elif sys.argv[1:2] == ["--partitions"]:  # Reference: the template's schema
        setup()
        month_partitions(datetime.fromisoformat(sys.argv[2]))
    else:
        main()
