"""Bytes per stored event on PostgreSQL (issue 39): ingest ``N`` simulator events (seed 7, the
sample policy, batches of 1000) into the database ``DATABASE_URL`` names (migrated here; use a
fresh one), then print each table's heap (with TOAST) and indexes per event, over every
partition. The script runs unchanged on a checkout from before the partitioned layout (plain
tables are their own partition tree), which is how docs/performance.md's "before" was taken.

    DATABASE_URL=postgres://… SECRET_KEY=… python tests/bench/bench_bytes.py 300000
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TABLES = (
    "observe_event",
    "observe_round",
    "observe_roundtool",
    "observe_toolhealthbucket",
    "observe_roundcountbucket",
)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from observe.services import events_ingest
    from tests.bench.bench_observe import rounds

    call_command("migrate", verbosity=0)
    wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    batch: list[dict[str, object]] = []
    total, started = 0, time.perf_counter()
    for events in rounds(7, datetime.now(UTC) - timedelta(days=2), 0.5):
        batch.extend(events)
        if len(batch) >= 1000:
            events_ingest(batch)
            total, batch = total + len(batch), []
            if total >= wanted:
                break
    print(f"{total:,} events ingested in {time.perf_counter() - started:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM observe_event")
        (stored,) = cursor.fetchone()
        sums = [0.0, 0.0]
        for table in TABLES:
            # A plain table has no partition tree: then its own sizes.
            cursor.execute(
                "SELECT COALESCE(sum(pg_table_size(relid)), pg_table_size(%s)),"
                " COALESCE(sum(pg_indexes_size(relid)), pg_indexes_size(%s))"
                " FROM pg_partition_tree(%s)",
                [table, table, table],
            )
            heap, indexes = (float(value) / stored for value in cursor.fetchone())
            sums = [sums[0] + heap, sums[1] + indexes]
            print(f"{table}: heap+TOAST {heap:.1f}, indexes {indexes:.1f} bytes per event")
        print(f"in all: {sum(sums):.1f} bytes per event ({stored:,} events)")


if __name__ == "__main__":
    main()
