"""The bridge's HTTP side on its own: a busy server's 503 is retried after its Retry-After with
the batch kept; a refused token stops the bridge; a refused batch is counted, not retried.
(The end-to-end test covers the happy path against a real server.)"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from kdcube.bridge.runner import Bridge, Fatal, Options


class Waits(threading.Event):
    """A stop event that records the waits instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0))
        return False


def bridge(answers: list[httpx.Response], seen: list[Any]) -> tuple[Bridge, Waits]:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    stop = Waits()
    made = Bridge(
        Options(redis_url="redis://127.0.0.1:1/0", url="http://td.test", token="t"),
        transport=httpx.MockTransport(handler),
        stop=stop,
        say=lambda line: None,
    )
    made.buffer.add(
        [{"event_id": str(i), "agent": "main", "turn_id": "t", "iteration": 0} for i in range(3)]
    )
    return made, stop


def test_a_busy_server_is_retried_after_its_retry_after_with_the_batch_kept() -> None:
    seen: list[Any] = []
    ok = httpx.Response(200, json={"accepted": 3, "duplicates": 0, "rejected": []})
    busy = httpx.Response(503, headers={"Retry-After": "2"}, json={"error": "busy"})
    b, stop = bridge([busy, ok], seen)
    b.flush()
    assert stop.waits == [2.0]
    assert b.waiting() == 3  # kept for the next flush
    b.flush()
    assert b.waiting() == 0
    assert b.counts.posted == 3
    assert seen[0].content == seen[1].content  # the same batch, re-posted as it was


def test_a_refused_token_stops_the_bridge_and_a_refused_batch_is_counted() -> None:
    b, _ = bridge([httpx.Response(401, json={"error": "no"})], [])
    with pytest.raises(Fatal, match="refused the token"):
        b.flush()
    b, _ = bridge([httpx.Response(400, json={"error": "bad"})], [])
    b.flush()
    assert b.waiting() == 0
    assert b.counts.refused == 3


def test_envelopes_wait_unmapped_until_the_server_names_the_policy_agents() -> None:
    import json

    from conformance import fixtures

    case = next(c for c in fixtures.read("kdcube-envelopes")["cases"] if c["id"] == "early-only")
    down = httpx.Response(503, headers={"Retry-After": "1"}, json={"error": "starting"})
    up = httpx.Response(200, json={"agents": ["main"]})
    b, _ = bridge([down, up], [])
    b.buffer.take(3)
    b.heartbeat()  # the server is not up yet
    for message in case["published"]:
        b.handle(message["channel"], json.dumps(message["payload"]))
    assert len(b.buffer) == 0
    assert len(b.unmapped) == len(case["published"])
    b.heartbeat()
    assert b.unmapped == []
    agents = {event["agent"] for event in b.buffer.take(1000)}
    assert agents == {"main"}  # helper.bot fell back to the policy's default agent


def test_the_heartbeat_reports_the_events_the_bridge_holds() -> None:
    """What ``traitdeck_bridge_buffered_events`` shows (GET /api/v1/metrics)."""
    import json

    seen: list[Any] = []
    b, _ = bridge([httpx.Response(200, json={"agents": ["main"]})], seen)
    b.heartbeat()
    body = json.loads(seen[0].content)
    assert body["counts"]["buffered"] == 3
    assert body["counts"]["dropped_rounds"] == 0
