"""Benchmark: event ingest throughput through the real service and database (SQLite file).

Run with `make bench`. Prints events per second for batches of 1 and of 100 events.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="traitdeck-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/bench.sqlite3"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from observe.domain.simulator import Simulator
    from observe.services import events_ingest
    from policy.domain.yaml_io import CLI_MAX_BYTES, load_policy

    data = load_policy(
        (ROOT / "policy/sample/sample-policy.yaml").read_bytes(), max_bytes=CLI_MAX_BYTES
    ).data
    sim = Simulator(data, seed=1)
    now = datetime.now(UTC)
    events: list[dict[str, object]] = []
    while len(events) < 6000:
        _, round_events = sim.next_round(now + timedelta(seconds=len(events)))
        events.extend(round_events)
    single, batched = events[:500], events[500:]

    start = time.perf_counter()
    for event in single:
        events_ingest([event])
    elapsed = time.perf_counter() - start
    print(f"ingest, 1 event per call:    {len(single) / elapsed:8.0f} events/s")

    start = time.perf_counter()
    for i in range(0, len(batched), 100):
        events_ingest(batched[i : i + 100])
    elapsed = time.perf_counter() - start
    print(f"ingest, 100 events per call: {len(batched) / elapsed:8.0f} events/s")

    start = time.perf_counter()
    result = events_ingest(batched[:100])
    print(
        f"re-post of 100 known events:  {(time.perf_counter() - start) * 1000:6.1f} ms "
        f"({result.duplicates} duplicates)"
    )


if __name__ == "__main__":
    main()
