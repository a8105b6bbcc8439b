"""Tool-health tallies kept by two workers ingesting at once on PostgreSQL equal a rebuild from
the stored events (calls reported both ways, repeats and reordered batches included)."""

from __future__ import annotations

import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.scale.conftest import Cluster, simulated_rounds


def _both_ways(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each finished call, the same call also reported as timed out (a new event)."""
    return [
        {
            **event,
            "event_id": str(uuid.uuid4()),
            "type": "tool.timeout",
            "limit_ms": 2000,
            "elapsed_ms": 2001,
            "async_alternative": None,
        }
        for event in events
        if event["type"] == "tool.finished"
    ]


def test_concurrent_ingest_keeps_the_tallies_a_rebuild_gives(cluster: Cluster) -> None:
    rng = random.Random(24)
    rounds = simulated_rounds(40, seed=24)
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    for events in rounds:
        extra = _both_ways(events)[:1]
        shuffled = [*events, *extra]
        rng.shuffle(shuffled)
        cut = rng.randrange(1, len(shuffled))
        for part in (shuffled[:cut], shuffled[cut:]):
            batches.append((rng.randrange(2), part))
    repeats = [(1 - worker, part) for worker, part in rng.sample(batches, len(batches) // 4)]
    jobs = batches + repeats
    rng.shuffle(jobs)
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda job: cluster.post_events(cluster.workers[job[0]], job[1]), jobs)
        )
    assert all(answer["rejected"] == [] for answer in answers)
    assert cluster.sql("SELECT count(*) FROM observe_toolhealthbucket")[0][0] > 0
    done = cluster.manage("toolhealth_backfill", "--check")
    assert "equal a rebuild" in done.stdout
