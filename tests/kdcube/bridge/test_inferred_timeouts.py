"""Tool health and its timeout advice count the timeouts the KDCube bridge infers (issue 35): an
isolated call the runtime's subprocess runner killed at its limit arrives as
``missing_tool_output``; mapped, it is a timeout in tool health, never also an error."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from conformance import fixtures
from kdcube.bridge.domain.mapping import Mapper
from kdcube.bridge.management.commands.kdcube_replay import retarget
from observe.services import events_ingest
from tests.markup import page_text, text_of
from tests.observe.health.test_api import URL, entry, finished
from tests.observe.ingest_support import load_sample_into_draft

pytestmark = pytest.mark.django_db

RECORDED = fixtures.read("kdcube-envelopes")["cases"]
CASE = next(c for c in RECORDED if c["id"] == "isolated-tool-killed-at-limit")
TOOL = "workspace_jobs.export_report"


def bridged(turns: int, case: dict[str, Any] = CASE) -> list[dict[str, Any]]:
    """The recorded round published again for ``turns`` new turns, 20 minutes ago, mapped."""
    mapper = Mapper({"main"}, isolation_timeout_s=CASE["input"]["isolation_limit_s"])
    first = case["published"][0]["payload"]["data"]["ts"]
    shift = int(time.time() * 1000) - 20 * 60_000 - first
    events: list[dict[str, Any]] = []
    for turn in range(turns):
        for message in case["published"]:
            moved = retarget(message, f"-{turn}", shift)
            events.extend(mapper.feed(moved["payload"]["data"]).events)
    return events


def test_tool_health_and_the_timeout_advice_count_the_inferred_timeouts(
    viewer_client: Client,
) -> None:
    load_sample_into_draft()
    events_ingest([finished(TOOL, f"ok{i}", 800.0) for i in range(20)])
    events = bridged(3)
    assert sum(e["type"] == "tool.timeout" for e in events) == 3
    assert not [e for e in events if e["type"] == "tool.finished"]
    result = events_ingest(events)
    assert not result.rejected
    found = entry(viewer_client.get(URL, {"agent": "main", "since": "1h"}).json(), TOOL)
    assert (found["calls"], found["timeouts"], found["errors"]) == (23, 3, 0)
    codes = {advice["code"]: advice for advice in found["advice"]}
    too_tight = codes["timeout-too-tight"]
    assert too_tight["evidence"]["timeouts"] == 3
    assert too_tight["evidence"]["at_limit"] == 3
    assert too_tight["evidence"]["mean_limit_ms"] == 12_000


def test_the_live_card_and_the_round_page_show_the_inferred_timeout_and_the_failed_turn(
    viewer_client: Client,
) -> None:
    load_sample_into_draft()
    failed = next(c for c in RECORDED if c["id"] == "decision-context-limit-retry-crashes")
    assert not events_ingest([*bridged(1), *bridged(1, failed)]).rejected
    live = page_text(viewer_client.get("/live/").content.decode())
    elapsed = next(e for e in bridged(1) if e["type"] == "tool.timeout")["elapsed_ms"]
    chip = f"timeout after {elapsed / 1000:.3f} s, limit 12 s"
    assert f"{chip} inferred: the runtime reported missing_tool_output" in live
    assert "failed TypeError: " in live
    assert "got multiple values for keyword argument 'force_sanitize'" in live
    page = viewer_client.get("/live/rounds/main/turn-f-0/1/").content.decode()
    outcome = text_of(page, "dd", class_="outcome")
    assert outcome.startswith("failed TypeError: ")
    assert "'force_sanitize'" in outcome
