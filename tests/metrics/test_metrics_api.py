"""GET /api/v1/metrics in process: every family, the figures known events imply, the token
scope, the cardinality cap."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from kdcube.bridge.services import bridge_report
from tests.metrics.known import FETCH, SEARCH, canon, expected, known_events, samples
from tests.observe.ingest_support import bearer, post_events, token

pytestmark = pytest.mark.django_db

URL = "/api/v1/metrics"
FAMILIES = (
    "traitdeck_rounds",
    "traitdeck_rounds_open",
    "traitdeck_actions",
    "traitdeck_tool_timeouts",
    "traitdeck_tool_call_duration_seconds",
    "traitdeck_ingest_events",
    "traitdeck_bridge_buffered_events",
    "traitdeck_bridge_dropped_rounds",
    "traitdeck_bridge_report_age_seconds",
    "traitdeck_policy_version",
    "traitdeck_kdcube_push",
    "traitdeck_kdcube_config_drift",
)


def scrape(client: Client, secret: str) -> Any:
    return client.get(URL, headers=bearer(secret))


def test_every_family_with_the_figures_the_events_imply(client: Client) -> None:
    writer, reader = token("events:write"), token("metrics:read")
    events = known_events("a")
    assert post_events(client, events, writer).json()["rejected"] == []
    # One refused event (no such type) and one repeat.
    bad = {**events[0], "event_id": "not-a-uuid", "type": "nope"}
    answer = post_events(client, [bad, events[1]], writer).json()
    assert (len(answer["rejected"]), answer["duplicates"]) == (1, 1)
    bridge_report(
        {"name": "kdcube", "counts": {"buffered": 7, "dropped_rounds": 2}}, token_name="b"
    )

    response = scrape(client, reader)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    text = response.content.decode()
    for family in FAMILIES:
        assert f"# TYPE {family} " in text or f"# TYPE {family}_total counter" in text, family
    found = samples(text)
    for key, value in expected().items():
        assert found.get(key) == value, key
    assert found[canon('traitdeck_ingest_events_total{result="refused"}')] == 1
    assert found['traitdeck_ingest_events_total{result="duplicate"}'] == 1
    assert found['traitdeck_bridge_buffered_events{bridge="kdcube"}'] == 7
    assert found['traitdeck_bridge_dropped_rounds_total{bridge="kdcube"}'] == 2
    assert found["traitdeck_policy_version"] == 0
    assert found['traitdeck_kdcube_push{status="none"}'] == 1
    assert found["traitdeck_kdcube_config_drift"] == 0


def test_only_a_token_with_the_metrics_scope_reads_them(client: Client) -> None:
    assert client.get(URL).status_code == 401
    assert scrape(client, token("events:write", "events:read")).status_code == 403
    assert scrape(client, "tdk_nope_nope").status_code == 401
    assert scrape(client, token("metrics:read")).status_code == 200


def test_tools_beyond_the_cap_fold_into_other(client: Client, settings: Any) -> None:
    settings.TRAITDECK_METRICS_MAX_TOOLS = 1
    post_events(client, known_events("b"), token("events:write"))
    found = samples(scrape(client, token("metrics:read")).content.decode())
    tools = {key.split('tool="')[1].split('"')[0] for key in found if 'tool="' in key}
    # The search tool has the most actions (12 against 3): it keeps its series.
    assert tools == {SEARCH, "other"}
    assert FETCH not in "".join(found)
    rejected = 'traitdeck_actions_total{agent="main",tool="other",disposition="rejected",'
    assert found[canon(rejected + 'code="tool-not-allowed"}')] == 3
