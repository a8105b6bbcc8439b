"""Two daphne workers sharing PostgreSQL and Redis: what one stores, the live pages of the other
show at once; concurrent ingest through both loses and duplicates nothing; static files and the
security headers come from the workers themselves with DEBUG off."""

from __future__ import annotations

import asyncio
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.markup import find_all
from tests.scale.conftest import Cluster, receive_until, simulated_rounds

#: Redis delivers in milliseconds; the workers' own database re-read is 600 s away.
FAN_OUT_WITHIN = 30.0  # a ceiling, not a wait: a busy machine took longer than 10 s


def test_static_files_are_served_hashed_and_cached_by_each_worker(cluster: Cluster) -> None:
    for worker in cluster.workers:
        page = httpx.get(f"{worker.url}/accounts/login/", timeout=30)
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        hrefs = [link.attrs["href"] for link in find_all(page.text, "link", rel="stylesheet")]
        hashed = [h for h in hrefs if re.fullmatch(r"/static/css/traitdeck\.[0-9a-f]{12}\.css", h)]
        assert hashed, f"collectstatic's hashed name is not in the page: {hrefs}"
        stylesheet = hashed[0]
        css = httpx.get(f"{worker.url}{stylesheet}", timeout=30)
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")
        assert "immutable" in css.headers["cache-control"]
        gzipped = httpx.get(
            f"{worker.url}{stylesheet}", headers={"Accept-Encoding": "gzip"}, timeout=30
        )
        assert gzipped.headers.get("content-encoding") == "gzip"
        assert gzipped.content == css.content  # httpx decodes: the same file, compressed


def test_an_event_posted_to_worker_a_reaches_a_live_page_on_worker_b(cluster: Cluster) -> None:
    a, b = cluster.workers
    rounds = simulated_rounds(3)

    async def scenario() -> None:
        async with cluster.live_socket(b) as socket_:
            for events in rounds:
                turn_id = events[0]["turn_id"]
                posted = time.monotonic()
                answer = cluster.post_events(a, events)
                assert answer["accepted"] == len(events)
                await receive_until(socket_, lambda m, t=turn_id: t in m, within=FAN_OUT_WITHIN)
                assert time.monotonic() - posted < FAN_OUT_WITHIN

    asyncio.run(scenario())


def test_live_pages_on_both_workers_see_rounds_posted_to_either(cluster: Cluster) -> None:
    a, b = cluster.workers
    to_a, to_b = simulated_rounds(2)

    async def scenario() -> None:
        async with cluster.live_socket(a) as on_a, cluster.live_socket(b) as on_b:
            cluster.post_events(b, to_b)
            cluster.post_events(a, to_a)
            turns = {to_a[0]["turn_id"], to_b[0]["turn_id"]}
            for socket_ in (on_a, on_b):
                # Both rounds may come in one message or in two.
                seen: set[str] = set()

                def both(message: str, seen: set[str] = seen) -> bool:
                    seen.update(t for t in turns if t in message)
                    return seen == turns

                await receive_until(socket_, both, within=FAN_OUT_WITHIN)

    asyncio.run(scenario())


def test_concurrent_ingest_through_both_workers_loses_and_duplicates_nothing(
    cluster: Cluster,
) -> None:
    """40 rounds, each split into three batches, posted by 8 threads through both workers, and
    a quarter of the batches posted a second time through the other worker (a runtime retrying
    after a timeout): every event is stored exactly once, every round holds all of its events."""
    rng = random.Random(11)
    rounds = simulated_rounds(40)
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    for events in rounds:
        cut1, cut2 = sorted(rng.sample(range(1, len(events)), 2))
        for part in (events[:cut1], events[cut1:cut2], events[cut2:]):
            batches.append((rng.randrange(2), part))
    repeats = [(1 - worker, part) for worker, part in rng.sample(batches, len(batches) // 4)]
    jobs = batches + repeats
    rng.shuffle(jobs)
    unique = {e["event_id"] for events in rounds for e in events}
    repeated = sum(len(part) for _, part in repeats)

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda job: cluster.post_events(cluster.workers[job[0]], job[1]), jobs)
        )

    assert all(answer["rejected"] == [] for answer in answers)
    assert sum(answer["accepted"] for answer in answers) == len(unique)
    assert sum(answer["duplicates"] for answer in answers) == repeated
    ids = [row[0] for row in cluster.sql("SELECT event_id::text FROM observe_event")]
    assert len(ids) == len(set(ids))  # stored once each
    assert unique <= set(ids)  # and none lost
    # Every round holds exactly its own events (the simulator's agents share turn numbers).
    stored = {
        (agent, turn_id, iteration): count
        for agent, turn_id, iteration, count in cluster.sql(
            "SELECT r.agent, r.turn_id, r.iteration, count(e.id) FROM observe_round r "
            "JOIN observe_event e ON e.round_id = r.id WHERE r.turn_id = ANY(%s) "
            "GROUP BY r.agent, r.turn_id, r.iteration",
            [events[0]["turn_id"] for events in rounds],
        )
    }
    assert stored == {
        (events[0]["agent"], events[0]["turn_id"], events[0]["iteration"]): len(events)
        for events in rounds
    }
    # One round row per round, however many workers assembled its batches.
    per_round = cluster.sql(
        "SELECT agent, turn_id, iteration, count(*) FROM observe_round "
        "GROUP BY agent, turn_id, iteration HAVING count(*) > 1"
    )
    assert per_round == []


def test_an_idle_live_page_stays_connected_through_redis(cluster: Cluster) -> None:
    """channels-redis waits 5 s per blocking read; a Redis client that times reads out at 5 s
    (redis-py 8's default) killed idle websockets with 1011. Idle for 12 s, then still live."""
    a, b = cluster.workers
    (events,) = simulated_rounds(1)

    async def scenario() -> None:
        async with cluster.live_socket(b) as socket_:
            await asyncio.sleep(12)
            cluster.post_events(a, events)
            turn = events[0]["turn_id"]
            await receive_until(socket_, lambda m: turn in m, within=FAN_OUT_WITHIN)

    asyncio.run(scenario())
