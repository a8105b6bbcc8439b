"""Nothing lost on upgrade (issue 36): a database made and filled by the last release before the
apps were regrouped (engine, discovery, kdcube) migrates with today's code, and every table keeps
every row.

The old tree is ``git archive`` of :data:`BEFORE` (the repository's own history), run from a temp
directory with this venv (its dependencies are the same), with the production settings as a real
server runs them. The database is a SQLite file, and under ``make test-scale`` (``DATABASE_URL``
names a PostgreSQL server) also a fresh database on that server."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.servers import server_env

ROOT = Path(__file__).resolve().parents[2]
#: The last commit of main with the old layout (policy held the KDCube models, bridge was an app
#: of its own).
BEFORE = "28661f3"
MOVED = ("kdcubebundle", "kdcubepush", "kdcuberead")
#: The store's tables issue 39 lays out anew (observe 0010/0011): they gain their round's day,
#: events lose ``received_at`` (never read), and on PostgreSQL the three are rebuilt partitioned,
#: event ids as uuid and the event JSON without what its row and round hold (read back whole by
#: ``observe.store.event_whole``; tests/observe/test_partitions.py checks that content). Their
#: rows are compared on the columns that carry them over unchanged. Observe 0013 (PostgreSQL)
#: keeps a round's assembly as the bytes of its JSON text (``bytea``, packed when next written):
#: compared as that text. Observe 0016 adds ``before_start``: NULL (not known) on every old row.
RELAID = {
    "observe_round": "every column but day",
    "observe_roundtool": "id, round_id, tool_id",
    "observe_event": "id, round_id, CAST(event_id AS TEXT), type, ts",
}


def old_tree(into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", BEFORE],
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, (
        f"git archive {BEFORE} failed (the test needs the repository's history): "
        f"{archive.stderr.decode(errors='replace')}"
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def run(tree: Path, database: str, *args: str) -> str:
    env = server_env(Path("unused"), "upgrade", PYTHONPATH=str(tree), DATABASE_URL=database)
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)} in {tree}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def query(database: str, sql: str, params: tuple[str, ...] = ()) -> list[tuple[object, ...]]:
    if database.startswith("sqlite:///"):
        with sqlite3.connect(database.removeprefix("sqlite:///")) as db:
            return db.execute(sql.replace("%s", "?"), params).fetchall()
    import psycopg

    with psycopg.connect(database) as db:
        return db.execute(sql, params).fetchall()  # type: ignore[arg-type]


def columns_of(database: str, table: str) -> list[str]:
    """The table's columns as SQL that reads each the same before and after the upgrade (JSON
    as its text on PostgreSQL, where a column may have become its text's bytes)."""
    if database.startswith("sqlite:///"):
        return [f'"{row[1]}"' for row in query(database, f'PRAGMA table_info("{table}")')]
    listed = (
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name = %s ORDER BY ordinal_position"
    )
    as_text = {"json": '"{}"::text', "jsonb": '"{}"::text', "bytea": "convert_from(\"{}\", 'UTF8')"}
    return [
        as_text.get(str(kind), '"{}"').format(name)
        for name, kind in query(database, listed, (table,))
    ]


def tables(database: str) -> dict[str, tuple[int, str]]:
    """Every table but Django's migration log: its row count and a digest of its rows in order."""
    if database.startswith("sqlite:///"):
        listed = "SELECT name FROM sqlite_master WHERE type = 'table'"
    else:
        # Tables and partitioned tables, not their partitions (a parent's SELECT reads them all).
        listed = (
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        )
    found = {}
    for (name,) in query(database, listed):
        if name in ("django_migrations", "sqlite_sequence"):
            continue
        columns = RELAID.get(str(name), "*")
        if columns == "every column but day":
            added = ('"day"', '"before_start"')
            columns = ", ".join(c for c in columns_of(database, str(name)) if c not in added)
        rows = query(database, f'SELECT {columns} FROM "{name}" ORDER BY 1')
        found[str(name)] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return found


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: a SQLite file, or a fresh database on ``make test-scale``'s server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db.sqlite3'}"
        return
    server = os.environ.get("DATABASE_URL", "")
    if not server.startswith(("postgres://", "postgresql://")):
        pytest.skip("PostgreSQL: runs under make test-scale (DATABASE_URL names its server)")
    import psycopg

    name = f"upgrade_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


def test_a_database_made_before_the_regrouping_migrates_with_every_row_intact(
    tmp_path: Path, database: str
) -> None:
    tree = old_tree(tmp_path / "before")
    run(tree, database, "manage.py", "migrate", "--no-input", "-v0")
    shutil.copy(ROOT / "tests" / "upgrade" / "seed.py", tree / "upgrade_seed.py")
    run(tree, database, "upgrade_seed.py", "3")
    before = tables(database)

    run(ROOT, database, "manage.py", "migrate", "--no-input", "-v0")
    after = tables(database)

    # New since: whether a round's row lies before its round.started (observe 0016), not known
    # for the rows stored before it.
    assert query(database, "SELECT count(*) FROM observe_round WHERE before_start IS NOT NULL") == [
        (0,)
    ]
    # The round counts kept by ingest (observe 0012), filled from the seeded rounds.
    assert after.pop("observe_roundcountbucket")[0] > 0
    assert (
        query(database, "SELECT sum(rounds) FROM observe_roundcountbucket")[0][0]
        == (before["observe_round"][0])
    )
    # Its model's four permissions are new; the others stay as they were.
    kept = query(
        database,
        "SELECT * FROM auth_permission WHERE codename NOT LIKE '%%_roundcountbucket' ORDER BY 1",
    )
    assert after.pop("auth_permission")[0] == len(kept) + 4
    after["auth_permission"] = (len(kept), hashlib.sha256(repr(kept).encode()).hexdigest())
    # The content types of the moved models now name the kdcube app: same ids, so the
    # permissions on them keep pointing at them (one more: the round counts' model).
    assert after.pop("django_content_type")[0] == before.pop("django_content_type")[0] + 1
    assert after == before
    # Every table of the apps held rows (the seed reached each model), the moved ones several.
    ours = ("accounts_", "audit_", "policy_", "observe_", "bridge_")
    assert [t for t, (rows, _) in before.items() if t.startswith(ours) and rows == 0] == []
    for table in ("policy_kdcubepush", "policy_kdcuberead", "policy_kdcubebundle"):
        assert before[table][0] >= 3, f"{table} was not seeded"

    labels = dict(
        query(
            database,
            "SELECT model, app_label FROM django_content_type WHERE model IN (%s, %s, %s)",
            MOVED,
        )
    )
    assert labels == dict.fromkeys(MOVED, "kdcube")

    # Today's models read the kept rows (the moved models through their old tables).
    counts = run(
        ROOT,
        database,
        "-c",
        "import django; django.setup()\n"
        "from kdcube.models import KDCubeBundle, KDCubePush, KDCubeRead\n"
        "from kdcube.bridge.models import BridgeStatus\n"
        "print([m.objects.count() for m in (KDCubeBundle, KDCubePush, KDCubeRead, BridgeStatus)])",
    )
    assert counts.strip() == str(
        [
            before[t][0]
            for t in (
                "policy_kdcubebundle",
                "policy_kdcubepush",
                "policy_kdcuberead",
                "bridge_bridgestatus",
            )
        ]
    )
