"""The history chart fits the rounds, marks publishes, and the page filters by policy version."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from observe.history_chart import rounds_chart
from observe.selectors import RoundFilter
from policy.domain.yaml_io import load_policy
from policy.models import PolicyVersion
from policy.services import draft_replace
from policy.versions import agent_hashes, policy_publish
from simulator.runtime import Simulator
from tests.markup import find_all, page_text
from tests.observe.live_support import ingest

pytestmark = pytest.mark.django_db

SAMPLE = (
    Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
).read_text(encoding="utf-8")
SECOND = SAMPLE.replace(
    "launch_background_job:\n                strategy: [neutral]",
    "launch_background_job:\n                strategy: [exploration]",
    1,
)


def publish(text: str, minutes_ago: int) -> str:
    draft_replace(data=load_policy(text).data, base_revision=None)
    version = policy_publish(actor="cli", message="v", confirm_warnings=True)
    PolicyVersion.objects.filter(pk=version.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return agent_hashes(load_policy(text).data)["main"]


def play(text: str, digest: str, minutes_ago: int, count: int, seed: int) -> None:
    simulator = Simulator(load_policy(text).data, seed=seed, policy_hashes={"main": digest})
    start = timezone.now() - timedelta(minutes=minutes_ago)
    for n in range(count):
        ingest(simulator.next_round(start + timedelta(seconds=5 * n))[1])


def test_it_fits_the_chart_to_the_rounds_and_filters_by_version(viewer_client: Client) -> None:
    first = publish(SAMPLE, 12)
    play(SAMPLE, first, 10, 4, seed=1)
    second = publish(SECOND, 6)
    play(SECOND, second, 5, 3, seed=2)

    chart = rounds_chart(RoundFilter())
    assert chart.fitted
    assert timezone.now() - chart.start < timedelta(minutes=11)  # not an hour, mostly empty
    assert [number for _, number in chart.publishes] == [2]  # v2 falls inside the rounds

    only_first = viewer_client.get("/api/v1/rounds").json()["rounds"]
    credited = {r["turn_id"]: r["policy_version"] for r in only_first}
    shown = page_text(viewer_client.get("/live/history/?version=1").content.decode())
    for turn, version in credited.items():
        assert (turn in shown) == (version == 1), turn
    marks = find_all(viewer_client.get("/live/history/").content.decode(), "g", class_="publish")
    assert [mark.find("title").text for mark in marks] == ["version 2 published"]
