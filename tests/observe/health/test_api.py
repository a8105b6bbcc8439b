"""GET /api/v1/tools/health: the shape, the filters, an empty window, unknown tools, advice."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from observe.services import events_ingest
from tests.observe.ingest_support import load_sample_into_draft

pytestmark = pytest.mark.django_db

URL = "/api/v1/tools/health"
AT = datetime.now(UTC) - timedelta(minutes=30)
TOOL_KEYS = {
    "agent",
    "tool_id",
    "calls",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "timeouts",
    "timeout_rate",
    "errors",
    "rejections",
    "early_starts",
    "dedups",
    "dedup_share",
    "drifted_rounds",
    "trend",
    "traits",
    "execution",
    "advice",
}


def call(
    tool: str, kind: str, turn: str, *, at: datetime = AT, agent: str = "main", **fields: Any
) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "ts": at.isoformat().replace("+00:00", "Z"),
        "agent": agent,
        "turn_id": turn,
        "iteration": 0,
        "type": kind,
        "action_index": 0,
        "tool_id": tool,
        "tool_call_id": "c",
        **fields,
    }


def finished(tool: str, turn: str, ms: float, **kw: Any) -> dict[str, Any]:
    return call(tool, "tool.finished", turn, status="ok", duration_ms=ms, **kw)


def timed_out(tool: str, turn: str, limit: float, **kw: Any) -> dict[str, Any]:
    return call(
        tool, "tool.timeout", turn, limit_ms=limit, elapsed_ms=limit, async_alternative=None, **kw
    )


def entry(body: dict[str, Any], tool_id: str) -> dict[str, Any]:
    return next(t for t in body["tools"] if t["tool_id"] == tool_id)


def test_it_answers_per_tool_numbers_beside_the_policy(viewer_client: Client) -> None:
    load_sample_into_draft()
    tool = "workspace_jobs.search"
    events_ingest([finished(tool, f"t{i}", float(i + 1)) for i in range(100)])
    events_ingest([timed_out(tool, f"x{i}", 2000) for i in range(3)])
    response = viewer_client.get(URL, {"agent": "main", "since": "1h"})
    assert response.status_code == 200
    body = response.json()
    assert set(body["window"]) == {"since", "until"}
    assert body["empty"] is False
    found = entry(body, tool)
    assert set(found) >= TOOL_KEYS
    assert found["calls"] == 103
    # The three timed-out calls count at their 2 s limit: p99 and max land on them.
    assert (found["p50_ms"], found["p95_ms"], found["p99_ms"], found["max_ms"]) == (
        52,
        98,
        2000,
        2000,
    )
    assert found["figures"] == {
        "p50_ms": "estimate",
        "p95_ms": "estimate",
        "p99_ms": "limit",
        "max_ms": "limit",
    }
    assert found["timeouts"] == 3
    assert found["timeout_rate"] == round(3 / 103, 4)
    assert found["execution"]["timeout_s"] == 2
    assert found["traits"]["strategy"] == ["exploration"]
    assert found["in_policy"] is True
    assert sum(point["calls"] for point in found["trend"]) == 103
    # Every tool of the agent is listed, the ones with no calls too.
    quiet = entry(body, "workspace_jobs.export_report")
    assert quiet["calls"] == 0
    assert quiet["p95_ms"] is None


def test_it_lists_a_tool_the_policy_does_not_know_as_such(viewer_client: Client) -> None:
    load_sample_into_draft()
    events_ingest([finished("ghost.tool", "t1", 5.0)])
    found = entry(viewer_client.get(URL, {"agent": "main"}).json(), "ghost.tool")
    assert found["in_policy"] is False
    assert found["traits"] is None
    assert found["advice"] == []


def test_it_says_so_when_the_window_holds_no_calls(viewer_client: Client) -> None:
    load_sample_into_draft()
    events_ingest([finished("workspace_jobs.search", "t1", 5.0)])
    body = viewer_client.get(
        URL, {"since": "2020-01-01T00:00:00Z", "until": "2020-01-02T00:00:00Z"}
    ).json()
    assert body["empty"] is True
    assert body["message"].startswith("No tool calls were recorded between 2020-01-01")


def test_it_filters_by_tool_substring_and_agent(viewer_client: Client) -> None:
    load_sample_into_draft()
    events_ingest(
        [finished("workspace_jobs.search", "t1", 5.0), finished("other.x", "t2", 5.0, agent="b")]
    )
    body = viewer_client.get(URL, {"agent": "main", "tool": "SEARCH"}).json()
    assert {t["tool_id"] for t in body["tools"]} == {
        "workspace_jobs.search",
        "named_services.search_objects",
        "react.memsearch",
    }
    assert all(t["agent"] == "main" for t in body["tools"])


def test_it_suggests_a_timeout_for_a_tool_without_one(viewer_client: Client) -> None:
    load_sample_into_draft()
    tool = "react.read"  # a built-in: no execution design
    events_ingest([finished(tool, f"t{i}", 1000.0) for i in range(25)])
    found = entry(viewer_client.get(URL, {"agent": "main"}).json(), tool)
    (advice,) = found["advice"]
    assert advice["code"] == "timeout-suggested"
    assert advice["evidence"]["calls"] == 25


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01"])
def test_it_refuses_a_time_it_cannot_read(viewer_client: Client, value: str) -> None:
    response = viewer_client.get(URL, {"since": value})
    assert response.status_code == 422
    assert response.json()["error"].startswith("since must be an ISO 8601 date")


def test_it_needs_a_login(client: Client) -> None:
    assert client.get(URL).status_code == 401


def test_it_counts_a_long_window_from_hourly_and_five_minute_rows_alike(
    viewer_client: Client,
) -> None:
    load_sample_into_draft()
    now = datetime.now(UTC)
    times = [now - timedelta(minutes=7 * n + 1) for n in range(45)]  # the last ~5 hours
    events_ingest(
        [finished("workspace_jobs.search", f"t{n}", 10.0 + n, at=at) for n, at in enumerate(times)]
    )
    since_sent = (now - timedelta(hours=3, minutes=17)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = viewer_client.get(
        URL, {"agent": "main", "tool": "workspace_jobs.search", "since": since_sent}
    )
    window = body.json()["window"]
    since = datetime.fromisoformat(window["since"])
    expected = sum(1 for at in times if at >= since)
    (found,) = body.json()["tools"]
    assert found["calls"] == expected
    assert sum(point["calls"] for point in found["trend"]) == expected


def test_timed_out_calls_count_at_their_limit_in_every_percentile_and_the_max(
    viewer_client: Client,
) -> None:
    """The walkthrough: a tool timing out 40 % of the time at 2 s showed max 1,930 ms."""
    load_sample_into_draft()
    tool = "mcp.browser.close"
    events_ingest([finished(tool, f"t{i}", 1930.0 - i) for i in range(6)])
    events_ingest([timed_out(tool, f"x{i}", 2000) for i in range(4)])
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert found["calls"] == 10
    assert found["max_ms"] == 2000
    assert found["p95_ms"] == 2000
    # Rank 5 of 10 is the 5th fastest finished call (1,929 ms), read from its bin.
    assert abs(found["p50_ms"] - 1929) <= 0.01 * 1929
    assert found["figures"] == {
        "p50_ms": "estimate",
        "p95_ms": "limit",
        "p99_ms": "limit",
        "max_ms": "limit",
    }


def test_limits_may_differ_within_a_window(viewer_client: Client) -> None:
    load_sample_into_draft()
    tool = "mcp.browser.close"
    events_ingest([finished(tool, f"t{i}", 10.0) for i in range(8)])
    events_ingest([timed_out(tool, "x1", 1000), timed_out(tool, "x2", 3000)])
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert found["p95_ms"] == 3000  # rank 10 of 10
    assert found["max_ms"] == 3000
    assert found["p50_ms"] == 10


def test_max_is_the_slowest_call_not_a_bins_point(viewer_client: Client) -> None:
    load_sample_into_draft()
    tool = "workspace_jobs.search"
    events_ingest([finished(tool, f"t{i}", float(i + 1)) for i in range(200)])
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert found["max_ms"] == 200
    assert found["figures"]["max_ms"] == "exact"
    assert found["figures"]["p50_ms"] == "estimate"


def test_the_exact_max_is_read_again_when_the_slowest_call_is_taken_back(
    viewer_client: Client,
) -> None:
    """A second tool.finished replaces the first: the max follows it down, exactly."""
    load_sample_into_draft()
    tool = "workspace_jobs.search"
    events_ingest([finished(tool, "t1", 150.5), finished(tool, "t2", 120.25)])
    events_ingest([finished(tool, "t1", 130.75, at=AT + timedelta(seconds=1))])
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert found["calls"] == 2
    assert found["max_ms"] == 130.75
    # A finished call reported later as a timeout leaves the max too.
    events_ingest([timed_out(tool, "t1", 100, at=AT + timedelta(seconds=2))])
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert (found["calls"], found["timeouts"]) == (2, 1)
    assert found["max_ms"] == 120.25
    assert found["figures"]["max_ms"] == "exact"


def test_the_max_read_again_counts_a_new_round_of_the_same_batch(viewer_client: Client) -> None:
    """The batch that takes the slowest call back also brings a new round's call: the max read
    again from the stored rounds sees it (the tallies are written after the batch's rounds)."""
    load_sample_into_draft()
    tool = "workspace_jobs.search"
    events_ingest([finished(tool, "t1", 150.5), finished(tool, "t2", 120.25)])
    events_ingest(
        [finished(tool, "t1", 110.0, at=AT + timedelta(seconds=1)), finished(tool, "t3", 140.0)]
    )
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert (found["calls"], found["max_ms"]) == (3, 140.0)


def test_silence_is_explained_and_few_timeouts_are_watched(viewer_client: Client) -> None:
    load_sample_into_draft()
    tool = "mcp.browser.close"
    events_ingest([finished(tool, f"t{i}", 900.0) for i in range(2)])
    events_ingest([timed_out(tool, f"x{i}", 2000) for i in range(3)])
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert found["advice"] == []
    assert found["quiet"]["message"] == "5 of 20 calls needed before advice"
    assert found["quiet"]["watch"] == "watch: 3 of 5 calls timed out"


def test_the_last_hour_trends_per_five_minutes(viewer_client: Client) -> None:
    """An hourly trend of the last hour was one or two points: nothing for a chart to draw."""
    load_sample_into_draft()
    tool = "workspace_jobs.search"
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    for minutes in (50, 35, 20, 5):
        at = now - timedelta(minutes=minutes)
        events_ingest([finished(tool, f"m{minutes}", 40.0, at=at)])
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), tool)
    assert [point["calls"] for point in found["trend"]] == [1, 1, 1, 1]
