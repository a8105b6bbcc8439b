"""Nothing lost on upgrade (issue 36): a database made and filled by the last release before the
apps were regrouped (engine, discovery, kdcube) migrates with today's code, and every table keeps
every row.

The old tree is ``git archive`` of :data:`BEFORE` (the repository's own history), run from a temp
directory with this venv (its dependencies are the same); the database is a SQLite file (the
production settings, as a real server runs them)."""

from __future__ import annotations

import hashlib
import io
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.servers import server_env

ROOT = Path(__file__).resolve().parents[2]
#: The last commit of main with the old layout (policy held the KDCube models, bridge was an app
#: of its own).
BEFORE = "28661f3"
MOVED = ("kdcubebundle", "kdcubepush", "kdcuberead")


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


def run(tree: Path, database: Path, *args: str) -> str:
    env = server_env(database, "upgrade", PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)} in {tree}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def tables(database: Path) -> dict[str, tuple[int, str]]:
    """Every table but Django's migration log: its row count and a digest of its rows in order."""
    with sqlite3.connect(database) as db:
        names = [
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT IN ('django_migrations', 'sqlite_sequence') ORDER BY name"
            )
        ]
        found = {}
        for name in names:
            rows = db.execute(f'SELECT * FROM "{name}" ORDER BY 1').fetchall()
            found[name] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return found


def test_a_database_made_before_the_regrouping_migrates_with_every_row_intact(
    tmp_path: Path,
) -> None:
    tree = old_tree(tmp_path / "before")
    database = tmp_path / "db.sqlite3"
    run(tree, database, "manage.py", "migrate", "--no-input", "-v0")
    shutil.copy(ROOT / "tests" / "upgrade" / "seed.py", tree / "upgrade_seed.py")
    run(tree, database, "upgrade_seed.py", "3")
    before = tables(database)

    run(ROOT, database, "manage.py", "migrate", "--no-input", "-v0")
    after = tables(database)

    # The content types of the moved models now name the kdcube app: same ids, so the
    # permissions on them keep pointing at them.
    assert after.pop("django_content_type")[0] == before.pop("django_content_type")[0]
    assert after == before
    for table in ("policy_kdcubepush", "policy_kdcuberead", "policy_kdcubebundle"):
        assert before[table][0] >= 3, f"{table} was not seeded"
    for table in ("policy_policyversion", "audit_auditentry", "observe_round", "observe_event"):
        assert before[table][0] >= 3, f"{table} was not seeded"

    with sqlite3.connect(database) as db:
        labels = dict(
            db.execute(
                "SELECT model, app_label FROM django_content_type WHERE model IN (?, ?, ?)", MOVED
            ).fetchall()
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
