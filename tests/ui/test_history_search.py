"""The history as a trace explorer (issue 12, names pinned in DESIGN §6): substring tool search
with suggestions, turn-id search, outcome filter, relative ranges, sort by duration and the
rounds-per-minute chart; the API takes the same names."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from observe.models import Round
from policy.services import draft_replace
from tests.conftest import make_user
from tests.markup import assert_element, find, find_all, page_text, text_of
from tests.observe.live_support import ingest_simulated, sample_policy

pytestmark = pytest.mark.django_db
URL = "/live/history/"


@pytest.fixture
def viewer(client: Client) -> Client:
    draft_replace(data=sample_policy(), base_revision=None)
    # Twenty rounds over the last ~7 minutes, one older round (two hours ago).
    ingest_simulated(20, start=timezone.now() - timedelta(minutes=7), gap_s=20)
    ingest_simulated(1, start=timezone.now() - timedelta(hours=2), seed=99)
    make_user("ana", "viewer", password="pw-ana-123")
    client.login(username="ana", password="pw-ana-123")
    return client


def rows(page: str) -> list[str]:
    shown = find_all(page, "tr", class_="history-row")
    return [row.attrs["id"].removeprefix("history-round-") for row in shown]


def test_tool_search_is_a_case_insensitive_substring(viewer: Client) -> None:
    tool = Round.objects.filter(tools__isnull=False).first().tools.first().tool_id  # type: ignore[union-attr]
    part = tool.split(".")[-1][2:].upper()
    page = viewer.get(URL, {"tool": part}).content.decode()
    found = rows(page)
    assert found
    expected = Round.objects.filter(tools__tool_id__icontains=part).distinct().count()
    assert len(found) == min(expected, 50)
    api = viewer.get("/api/v1/rounds", {"tool": part, "limit": 500}).json()["rounds"]
    assert len(api) == expected
    # The box suggests the tools seen.
    assert_element(page, "option", value=tool)


def test_a_tool_that_matches_nothing_gets_a_hint(viewer: Client) -> None:
    page = page_text(viewer.get(URL, {"tool": "zzz-nothing"}).content.decode())
    assert "No rounds match this search." in page
    assert "matches any part of a tool id, any case" in page
    assert "no tool seen so far contains “zzz-nothing”" in page


def test_turn_search_and_outcome_filter(viewer: Client) -> None:
    row = Round.objects.order_by("-started_at").first()
    assert row is not None
    page = viewer.get(URL, {"turn": row.turn_id[-6:]}).content.decode()
    assert str(row.pk) in rows(page)
    assert all(Round.objects.get(pk=pk).turn_id.endswith(row.turn_id[-6:]) for pk in rows(page))
    for outcome in ("ok", "failed", "retried"):
        found = rows(viewer.get(URL, {"outcome": outcome}).content.decode())
        assert len(found) == Round.objects.filter(outcome=outcome).count()
        api = viewer.get("/api/v1/rounds", {"outcome": outcome, "limit": 500}).json()["rounds"]
        assert {r["outcome"] for r in api} <= {outcome}
    bad = viewer.get("/api/v1/rounds", {"outcome": "great"})
    assert bad.status_code == 422
    assert "outcome must be one of ok, retried, failed, in_progress" in bad.json()["error"]


def test_relative_ranges(viewer: Client) -> None:
    everything = rows(viewer.get(URL).content.decode())
    last_hour = rows(viewer.get(URL, {"since": "1h"}).content.decode())
    assert len(everything) == len(last_hour) + 1  # the round from two hours ago
    recent = viewer.get(URL, {"since": "15m"}).content.decode()
    assert_element(recent, text="last 15 min", aria_pressed="true")
    assert len(viewer.get("/api/v1/rounds", {"since": "1h", "limit": 500}).json()["rounds"]) == (
        len(last_hour)
    )
    # One reader for every time window (core.timewindow): any whole span of s, m, h, d or w.
    assert viewer.get("/api/v1/rounds", {"since": "3w"}).status_code == 200
    assert viewer.get("/api/v1/rounds", {"since": "3x"}).status_code == 422


def test_sort_by_duration_longest_first(viewer: Client) -> None:
    page = viewer.get(URL, {"sort": "duration"}).content.decode()
    shown = [Round.objects.get(pk=pk) for pk in rows(page)]
    durations = [r.finished_at - r.started_at for r in shown if r.finished_at]
    assert durations == sorted(durations, reverse=True)
    assert text_of(page, "p", class_="sort-note").startswith("Sorted by duration, longest first")


def test_the_chart_counts_rounds_per_minute_by_kind(viewer: Client) -> None:
    page = viewer.get(URL).content.decode()
    bars = find(page, "svg", class_="rounds-chart").find_all("rect", class_="bar")
    said = [re.fullmatch(r".*UTC: (\d+) rounds?\b.*", bar.find("title").text) for bar in bars]
    titles = [match[1] for match in said if match]
    # Without a ``since`` the chart fits the rounds: from the oldest (two hours ago) to now.
    assert sum(int(n) for n in titles) == 21
    assert re.fullmatch(
        r"Rounds per \d+ min by kind; peak \d+", find(page, "title", id="chart-title").text
    )
    with_rejection = Round.objects.filter(
        rejections__gt=0, started_at__gte=timezone.now() - timedelta(hours=1)
    ).count()
    if with_rejection:
        assert_element(page, "polyline", class_="series series-rejected")
        assert_element(page, "li", f"with a rejection ({with_rejection})")
