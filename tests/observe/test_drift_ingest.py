"""Drift on ingest (issue 13): finished rounds are predicted under the version their
``policy_hash`` names; the runtime that did something else is flagged, in words, everywhere a
round shows."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from observe.models import Round
from policy.domain.yaml_io import load_policy
from policy.models import PolicyVersion
from policy.services import draft_replace
from policy.versions import agent_hashes, policy_publish
from simulator.runtime import Simulator
from tests.markup import find, find_all, page_text, text_of
from tests.observe.live_support import ingest

pytestmark = pytest.mark.django_db

SAMPLE = (
    Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
).read_text(encoding="utf-8")
#: What a misconfigured runtime runs: the early tool is not neutral there.
LAUNCH_EXPLORES = SAMPLE.replace(
    "launch_background_job:\n                strategy: [neutral]",
    "launch_background_job:\n                strategy: [exploration]",
    1,
)


def data(text: str) -> Any:
    return load_policy(text).data


@pytest.fixture
def v1_hash() -> str:
    draft_replace(data=data(SAMPLE), base_revision=None)
    version = policy_publish(actor="cli", message="sample", confirm_warnings=True)
    # Published before the rounds below ran: a round is credited to the version in force then.
    PolicyVersion.objects.filter(pk=version.pk).update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    return agent_hashes(data(SAMPLE))["main"]


def run(policy_text: str, claimed_hash: str, count: int, seed: int = 4) -> None:
    """``count`` rounds a runtime plays under ``policy_text`` while reporting ``claimed_hash``."""
    simulator = Simulator(data(policy_text), seed=seed, policy_hashes={"main": claimed_hash})
    start = timezone.now() - timedelta(minutes=30)
    for number in range(count):
        ingest(simulator.next_round(start + timedelta(seconds=10 * number))[1])


def test_a_runtime_that_follows_its_version_shows_no_drift(v1_hash: str) -> None:
    run(SAMPLE, v1_hash, 60)
    finished = Round.objects.filter(outcome__isnull=False)
    assert finished.count() == 60
    assert set(finished.values_list("drift", flat=True)) == {False}


def test_drift_predicts_under_the_react_version_the_precedence_gives(
    v1_hash: str, settings: Any
) -> None:
    """The simulator plays v3 (early starts); an instance that assumes v2 (KDCube's default)
    predicts no early start, so those rounds drift and the notes say v2 was assumed. A round
    whose round.started reports v3 is predicted under v3 whatever the setting."""
    settings.TRAITDECK_REACT_AGENT_VERSION = "v2"
    run(SAMPLE, v1_hash, 40)
    drifted = Round.objects.filter(drift=True)
    assert drifted.exists()
    notes = [n["what"] for row in drifted for n in row.drift_notes]
    assert any(n.endswith("policy v1 (react v2) predicts no early start") for n in notes)
    Round.objects.all().delete()
    simulator = Simulator(data(SAMPLE), seed=5, policy_hashes={"main": v1_hash})
    start = timezone.now() - timedelta(minutes=20)
    for number in range(40):
        events = simulator.next_round(start + timedelta(seconds=10 * number))[1]
        for event in events:
            if event["type"] == "round.started":
                event["react_version"] = "v3"
        ingest(events)
    assert not Round.objects.filter(drift=True).exists()
    assert Round.objects.filter(drift=False).count() == 40


def test_a_runtime_running_something_else_is_flagged_in_words_everywhere(
    v1_hash: str, viewer_client: Client
) -> None:
    run(LAUNCH_EXPLORES, v1_hash, 80)
    drifted = Round.objects.filter(drift=True)
    assert drifted.exists()
    row = drifted.first()
    assert row is not None
    note = row.drift_notes[0]["what"]
    assert note.startswith("the runtime did not start workspace_jobs.launch_background_job early")
    assert note.endswith("policy v1 (react v3) predicts an early start")
    # API: the flag, the filter and the notes.
    listed = viewer_client.get("/api/v1/rounds?has=drift&limit=500").json()["rounds"]
    assert len(listed) == drifted.count()
    assert all(r["drift"] is True and r["policy_version"] == 1 for r in listed)
    detail = viewer_client.get(f"/api/v1/rounds/main/{row.turn_id}/{row.iteration}").json()
    assert detail["drift"] is True
    assert detail["drift_notes"][0]["what"] == note
    # Pages: the round page lists the notes, the history and the live card show the chip.
    page = viewer_client.get(f"/live/rounds/main/{row.turn_id}/{row.iteration}/").content.decode()
    assert "the runtime did not do what version 1 says" in page_text(page)
    assert note in page_text(page)
    history = viewer_client.get("/live/history/?has=drift").content.decode()
    chips = find_all(history, "span", class_="chip drift", data_kind="drift")
    assert len(chips) == min(drifted.count(), 50)
    assert {chip.text for chip in chips} == {"drift"}
    live = viewer_client.get("/live/").content.decode()
    assert find_all(live, "span", class_="chip drift")
    assert text_of(live, "b", id="count-drift") == str(drifted.count())
    overview = viewer_client.get("/").content.decode()
    finished = Round.objects.filter(outcome__isnull=False).count()
    [by_version] = find(overview, "ul", class_="drift-by-version").find_all("li")
    assert by_version.text == (
        f"version 1: {drifted.count()} drifted of {finished} finished rounds checked"
        f" ({round(drifted.count() / finished * 100)} %)"
    )
    link = by_version.find("a", href="/live/history/?has=drift")
    assert link.find("span", class_="chip drift").text == f"{drifted.count()} drifted"


def test_a_hash_no_version_has_is_an_unknown_policy_not_drift(
    v1_hash: str, viewer_client: Client
) -> None:
    run(LAUNCH_EXPLORES, "0" * 64, 10)
    assert set(Round.objects.values_list("drift", flat=True)) == {None}
    listed = viewer_client.get("/api/v1/rounds").json()["rounds"]
    assert all(r["unknown_policy"] is True for r in listed)
    row = Round.objects.filter(outcome__isnull=False).first()
    assert row is not None
    page = viewer_client.get(f"/live/rounds/main/{row.turn_id}/{row.iteration}/").content.decode()
    assert text_of(page, "dd", class_="policy-version").startswith("unknown policy ")
    assert text_of(page, "dd", class_="drift-state") == (
        "not checked (no published version to predict with)"
    )


def test_the_live_page_filters_on_drift(v1_hash: str, viewer_client: Client) -> None:
    run(LAUNCH_EXPLORES, v1_hash, 80)
    drifted = Round.objects.filter(drift=True).count()
    assert drifted > 0
    page = viewer_client.get("/live/?has=drift").content.decode()
    assert "checked" in find(page, "input", name="has", value="drift").attrs
    assert len(find_all(page, "p", class_="drift-note")) == drifted
    assert text_of(page, "b", id="count-rounds") == str(drifted)
