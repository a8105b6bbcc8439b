"""The bridge end to end: recorded KDCube envelopes published on a real ``redis-server``, read by
the ``kdcube_bridge`` command (its own process), posted to a real Traitdeck (daphne); the rounds
Traitdeck stores are those the runtime decided (its recorded answer, stream by stream).
Also: a malformed envelope is skipped with a reason while the bridge goes on; Redis going away and
coming back; a replay is stored once."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import redis

from conformance import fixtures
from kdcube.bridge.domain.mapping import DEFAULT_RELAY
from tests.kdcube.bridge.conftest import RedisServer, Traitdeck, start_bridge, wait_until

RECORDED = fixtures.read("kdcube-envelopes")
CHANNEL = f"{DEFAULT_RELAY}.acme:demo:chat.events.sess-1"


def publish_all(server: RedisServer, cases: list[dict[str, Any]]) -> None:
    for case in cases:
        for message in case["published"]:
            server.publish(message["channel"], json.dumps(message["payload"]))


def subscribed(server: RedisServer) -> bool:
    try:
        return int(redis.Redis(port=server.port).pubsub_numpat()) >= 1
    except redis.RedisError:
        return False


def stored_round(td: Traitdeck, token: str, turn: str, iteration: int) -> dict[str, Any] | None:
    page = td.get("/api/v1/rounds?agent=main&limit=100", token)
    for row in page["rounds"]:
        if row["turn_id"] == turn and row["iteration"] == iteration and row["finished_at"]:
            detail: dict[str, Any] = td.get(f"/api/v1/rounds/main/{turn}/{iteration}", token)
            return detail
    return None


def actions_of(detail: dict[str, Any]) -> list[list[tuple[int, str, str | None, bool]]]:
    return [
        [(a["index"], a["verdict"], a["code"], a["early"]) for a in attempt["actions"]]
        for attempt in detail["attempts"]
    ]


def decided(case: dict[str, Any]) -> list[list[tuple[int, str, str | None, bool]]]:
    """What the runtime decided, stream by stream, as the bridge can show it: a replaced stream,
    or one whose decision failed (``chat.error``), shows only through its early starts
    (accepted, started early)."""
    streams = case["runtime_attempts"]
    out = []
    for number, stream in enumerate(streams):
        if number < len(streams) - 1 or case["input"].get("fails"):
            out.append([(i, "accepted", None, True) for i, a in enumerate(stream) if a["early"]])
        else:
            out.append([(i, a["verdict"], a["code"], a["early"]) for i, a in enumerate(stream)])
    # A stream that shows nothing (a failed decision with no early start) is no attempt at all.
    return [stream for stream in out if stream]


def test_bridged_rounds_are_the_rounds_the_runtime_decided(
    redis_server: RedisServer, traitdeck: Traitdeck, tmp_path: Path
) -> None:
    token = traitdeck.token("bridge", "events:write", "events:read")
    log = tmp_path / "bridge.log"
    # The recorded isolated call was killed at a 12 s limit: the setting tells the bridge so.
    limit = {"TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S": "12"}
    bridge = start_bridge(traitdeck, redis_server.url, token, log, settings=limit)
    wait_until(lambda: subscribed(redis_server), what="the bridge to subscribe")

    publish_all(redis_server, RECORDED["cases"])
    for case in RECORDED["cases"]:
        spec = case["input"]["round"]
        found: dict[str, Any] = {}

        def arrived(spec: dict[str, Any] = spec, found: dict[str, Any] = found) -> bool:
            detail = stored_round(traitdeck, token, spec["turn_id"], spec["iteration"])
            if detail is not None:
                found["detail"] = detail
            return detail is not None

        wait_until(arrived, what=f"round {case['id']}", timeout=45)
        detail = found["detail"]
        assert actions_of(detail) == decided(case), case["id"]
        assert detail["agent_in_policy"] is True  # helper.bot fell back to the default agent
        assert all(e.get("inferred") or e["type"] == "action.rejected" for e in detail["events"])
        early = sum(a["early"] for stream in case["runtime_attempts"] for a in stream)
        assert detail["counts"]["early_starts"] == early
        if case["input"].get("isolation_limit_s"):
            # Killed at its limit: a timeout (inferred), not an error.
            (call,) = detail["attempts"][0]["actions"]
            assert call["status"] == "timeout", case["id"]
            assert call["timeout"]["limit_ms"] == 12_000
            assert call["timeout"]["runtime_error_code"] == "missing_tool_output"
            assert detail["counts"]["timeouts"] == 1
        if case["input"].get("fails"):
            # The failed turn ended its round, with the error KDCube sent.
            assert detail["outcome"] == "failed", case["id"]
            assert detail["error_code"] in ("ServiceException", "TypeError")
            assert detail["error_message"]

    # A replay of the same envelopes is stored once (event ids come from the envelopes).
    before = stored_round(traitdeck, token, "turn-a", 1)
    assert before is not None
    publish_all(redis_server, RECORDED["cases"][1:2])
    replayed = _envelopes() + len(RECORDED["cases"][1]["published"])
    wait_until(lambda: _seen(log) >= replayed, what="the replay")
    after = stored_round(traitdeck, token, "turn-a", 1)
    assert after is not None
    assert len(after["events"]) == len(before["events"])

    # A malformed envelope is skipped with its reason; the bridge goes on.
    redis_server.publish(CHANNEL, "{not json")
    redis_server.publish(CHANNEL, json.dumps({"data": {"type": "react.tool.call"}}))
    # Wait for both reasons: the periodic stats line counts what was skipped so far, and one
    # printed between the two envelopes names the first only.
    wait_until(
        lambda: all(reason in log.read_text() for reason in ("not JSON", "no conversation")),
        what="both skip reasons in the log",
    )
    assert bridge.poll() is None

    # Redis goes away and comes back: the bridge reconnects and reads new rounds.
    redis_server.stop()
    wait_until(lambda: "Redis unavailable" in log.read_text(), what="the bridge to notice")
    assert bridge.poll() is None
    redis_server.start()
    wait_until(lambda: subscribed(redis_server), what="the bridge to subscribe again")
    # A search round, then the turn's final answer (which ends it), in a new turn.
    fresh = json.loads(json.dumps([RECORDED["cases"][0], RECORDED["cases"][3]]))
    for case in fresh:
        for message in case["published"]:
            message["payload"]["data"]["conversation"]["turn_id"] = "turn-after-restart"
    publish_all(redis_server, fresh)
    wait_until(
        lambda: stored_round(traitdeck, token, "turn-after-restart", 0) is not None,
        what="a round after Redis came back",
        timeout=45,
    )
    assert bridge.poll() is None


def _seen(log: Path) -> int:
    """Envelopes the bridge has taken in and posted, by its latest log line (0 while waiting)."""
    for line in reversed(log.read_text().splitlines()):
        match = re.search(r"; (\d+) envelopes, .* (\d+) waiting$", line)
        if match:
            return int(match.group(1)) if match.group(2) == "0" else 0
    return 0


def _envelopes() -> int:
    return sum(len(c["published"]) for c in RECORDED["cases"])
