"""Redis goes away while two workers run: ingest keeps storing (each failed broadcast is logged,
the runtime gets its normal answer), and when Redis is back the live view catches up — a page
reconnecting with the version it had gets what it missed, and new events fan out again."""

from __future__ import annotations

import asyncio
import time

import httpx
from websockets.exceptions import WebSocketException

from tests.markup import page_text
from tests.scale.conftest import Cluster, receive_until, simulated_rounds, versions_in

FAN_OUT_WITHIN = 30.0  # a ceiling, not a wait: a busy machine took longer than 10 s


def test_redis_stopped_ingest_still_stores_and_the_live_view_resyncs(cluster: Cluster) -> None:
    a, b = cluster.workers
    before, during, after = simulated_rounds(3)

    async def up_to_date() -> int:
        """A live page on B sees ``before``; returns the newest version it holds."""
        async with cluster.live_socket(b) as socket_:
            cluster.post_events(a, before)
            seen = await receive_until(
                socket_, lambda m: before[0]["turn_id"] in m, within=FAN_OUT_WITHIN
            )
        return max(v for m in seen for v in versions_in(m))

    shown_version = asyncio.run(up_to_date())

    cluster.redis_stop()
    try:
        answer = cluster.post_events(a, during)  # the runtime notices nothing
        assert answer == {"accepted": len(during), "duplicates": 0, "rejected": []}
        stored = cluster.sql(
            "SELECT count(*) FROM observe_event e JOIN observe_round r ON e.round_id = r.id "
            "WHERE r.turn_id = %s",
            during[0]["turn_id"],
        )
        assert stored == [(len(during),)]
        assert "could not notify the live view" in a.log_text()
        # Pages keep working meanwhile: they read the database.
        page = httpx.get(f"{b.url}/live/", cookies=cluster.session_cookies(b), timeout=30)
        assert page.status_code == 200
        assert during[0]["turn_id"] in page_text(page.text)
    finally:
        cluster.redis_start()

    async def resync() -> None:
        """The page reconnects (htmx retries) with the newest version it holds: it gets the round
        it missed, then new rounds fan out through Redis again."""
        deadline = time.monotonic() + 30
        while True:
            try:
                async with cluster.live_socket(b, f"?since={shown_version}") as socket_:
                    await receive_until(
                        socket_, lambda m: during[0]["turn_id"] in m, within=FAN_OUT_WITHIN
                    )
                    cluster.post_events(a, after)
                    await receive_until(
                        socket_, lambda m: after[0]["turn_id"] in m, within=FAN_OUT_WITHIN
                    )
                    return
            except (OSError, WebSocketException) as exc:  # a worker still reconnecting to Redis
                if time.monotonic() > deadline:
                    raise AssertionError(f"the live page could not reconnect: {exc}") from exc
                await asyncio.sleep(0.5)

    asyncio.run(resync())
