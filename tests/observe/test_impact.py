"""The impact of a policy change on recorded rounds: ``POST /api/v1/policy/impact`` and the
publish page's summary (issue 13)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from observe.models import Round
from policy.domain.yaml_io import load_policy
from policy.services import draft_change, draft_replace
from policy.versions import policy_publish
from tests.markup import find, find_all, text_of, texts
from tests.observe.live_support import ingest_simulated

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
IMPACT = "/api/v1/policy/impact"


def summary(page: str) -> str:
    """The impact card's first sentence: how many recorded rounds the change alters."""
    return find(page, "section", id="impact").find_all("p")[0].text


@pytest.fixture
def recorded() -> None:
    """The sample published as version 1, and 120 simulator rounds recorded under it."""
    draft_replace(data=load_policy(SAMPLE.read_bytes()).data, base_revision=None)
    policy_publish(actor="cli", message="sample", confirm_warnings=True)
    ingest_simulated(120, start=timezone.now() - timedelta(minutes=30))


def launch_explores() -> None:
    """The early tool stops being neutral: it can no longer start early."""

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        traits = doc["surfaces"]["as_consumer"]["agents"]["main"]["tools"][0]["tool_traits"]
        traits["launch_background_job"]["strategy"] = ["exploration"]
        return doc

    draft_change(edit=edit, base_revision=None)


def post(client: Client, body: dict[str, Any] | None = None) -> Any:
    return client.post(IMPACT, body or {}, content_type="application/json")


def test_an_unchanged_draft_changes_no_round(viewer_client: Client, recorded: None) -> None:
    response = post(viewer_client)
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["candidate"].startswith("the draft")
    assert data["baseline"] == "version 1"
    assert data["rounds"] == Round.objects.count() == 120
    assert data["affected_rounds"] == 0


def test_a_trait_change_lists_every_affected_round_with_its_page(
    viewer_client: Client, recorded: None
) -> None:
    launch_explores()
    data = post(viewer_client).json()
    assert data["totals"]["early_lost"] > 0
    assert data["totals"]["early_gained"] == 0
    lost = [c for r in data["affected"] for c in r["changes"] if c["kind"] == "early_lost"]
    # Only the changed tool loses its early starts (react.delegate, a built-in, keeps its own).
    assert {c["tool_id"] for c in lost} == {"workspace_jobs.launch_background_job"}
    assert len(lost) == data["totals"]["early_lost"]
    first = data["affected"][0]
    page = viewer_client.get(first["url"])
    assert page.status_code == 200
    assert first["turn_id"] in text_of(page.content.decode(), "h1")
    # The other way round the same rounds change back.
    back = post(viewer_client, {"candidate": "1", "baseline": "draft"}).json()
    assert back["affected_rounds"] == data["affected_rounds"]
    assert back["totals"]["early_gained"] == data["totals"]["early_lost"]


def test_the_window_and_filters_narrow_the_rounds(viewer_client: Client, recorded: None) -> None:
    launch_explores()
    assert post(viewer_client, {"limit": 10}).json()["rounds"] == 10
    only = post(viewer_client, {"has": ["early"]}).json()
    assert only["rounds"] == Round.objects.filter(early_starts__gt=0).count()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"baseline": "7"}, "There is no version 7."),
        ({"candidate": "tomorrow"}, "A side is 'draft', 'published' or a version number"),
        ({"limit": 0}, "limit must be a whole number"),
        ({"has": "early"}, "has must be a list"),
        ({"since": "yesterday"}, "since must be an ISO 8601"),
        ({"agent": 3}, "agent must be a string"),
    ],
)
def test_a_bad_request_is_422_with_the_reason(
    viewer_client: Client, recorded: None, body: dict[str, Any], reason: str
) -> None:
    response = post(viewer_client, body)
    assert response.status_code == 422
    assert reason in response.json()["error"]


def test_nothing_published_is_a_clear_refusal(viewer_client: Client) -> None:
    response = post(viewer_client)
    assert response.status_code == 422
    assert "Nothing is published yet" in response.json()["error"]
    page = viewer_client.get("/policy/impact/")
    assert page.status_code == 200
    assert text_of(page.content.decode(), "p", id="impact-note").startswith(
        "Nothing is published yet"
    )


def test_the_publish_page_says_what_the_change_alters(
    publisher_client: Client, recorded: None
) -> None:
    page = publisher_client.get("/policy/publish/")
    assert summary(page.content.decode()).startswith(
        "This change alters none of the last 120 recorded rounds"
    )
    launch_explores()
    page = publisher_client.get("/policy/publish/")
    text = page.content.decode()
    affected = post(publisher_client).json()["affected_rounds"]
    impact = find(text, "section", id="impact")
    assert f"This change alters {affected} of the last 120" in impact.text
    [said] = [p for p in impact.find_all("p") if p.text.startswith("This change alters")]
    assert said.find("strong").text == str(affected)  # the number stands out
    assert "early starts lost" in impact.text


def test_the_impact_page_compares_any_two_sides(viewer_client: Client, recorded: None) -> None:
    launch_explores()
    page = viewer_client.get("/policy/impact/?baseline=1&candidate=draft&limit=50")
    assert page.status_code == 200
    text = page.content.decode()
    said = summary(text)
    assert "of the last 50 recorded rounds" in said
    assert "(each replayed under version 1 and under the draft (revision" in said
    assert "early starts lost" in texts(text, "ul", class_="impact-totals")[0]
    refused = viewer_client.get("/policy/impact/?baseline=9")
    assert refused.status_code == 422
    assert text_of(refused.content.decode(), "p", id="impact-refusal") == "There is no version 9."
    assert viewer_client.get("/policy/impact/?limit=abc").status_code == 422


def test_a_window_replayed_in_steps_adds_up_to_the_whole(
    viewer_client: Client, recorded: None
) -> None:
    launch_explores()
    whole = post(viewer_client, {"limit": 120}).json()
    assert whole["read"] == 120
    steps, before, totals, affected = 0, None, {}, []
    while True:
        body: dict[str, Any] = {"limit": 50}
        if before:
            body["before"] = before
        step = post(viewer_client, body).json()
        steps += 1
        for kind, count in step["totals"].items():
            totals[kind] = totals.get(kind, 0) + count
        affected += [r["turn_id"] for r in step["affected"]]
        before = step["next"]
        if before is None:
            break
    assert steps == 3
    assert totals == whole["totals"]
    assert affected == [r["turn_id"] for r in whole["affected"]]
    bad = post(viewer_client, {"before": "not-a-cursor"})
    assert bad.status_code == 422


def test_the_impact_page_narrows_the_window_to_an_agent_and_a_time_range(
    viewer_client: Client, recorded: None
) -> None:
    launch_explores()
    everything = viewer_client.get("/policy/impact/?baseline=1&candidate=draft").content.decode()
    assert "of the last 120 recorded rounds" in summary(everything)
    recent = viewer_client.get(
        "/policy/impact/?baseline=1&candidate=draft&since=15m"
    ).content.decode()
    found = re.search(r"of the last (\d+) recorded rounds", summary(recent))
    assert found is not None
    assert 0 < int(found.group(1)) < 120
    nobody = viewer_client.get(
        "/policy/impact/?baseline=1&candidate=draft&agent=nobody"
    ).content.decode()
    assert summary(nobody).startswith("No recorded round to replay yet")
    bad = viewer_client.get("/policy/impact/?baseline=1&since=yesterday")
    assert bad.status_code == 200
    assert find(bad.content.decode(), "ul", class_="messages").find("li", class_="error").text


def test_an_affected_round_shows_both_predictions_side_by_side(
    viewer_client: Client, recorded: None
) -> None:
    launch_explores()
    page = viewer_client.get("/policy/impact/?baseline=1&candidate=draft").content.decode()
    link = find_all(page, "a", class_="compare")[0].attrs["href"]
    compare = viewer_client.get(link)
    assert compare.status_code == 200
    text = compare.content.decode()
    assert "between version 1 (multi-action" in text_of(text, "p", id="impact-round-summary")
    changed = find_all(text, "tr", class_="changed")
    assert changed
    # under version 1, the early tool still starts early
    assert "started early" in " ".join(row.text for row in changed)
    missing = viewer_client.get("/policy/impact/rounds/main/no-such-turn/0/")
    assert missing.status_code == 404


def test_a_round_that_reported_its_react_agent_is_replayed_under_it(
    viewer_client: Client, recorded: None, settings: Any
) -> None:
    """round.started said v2 while the instance assumes v3: the side-by-side predicts it under v2
    and says so, the impact counts it under v2, and the export carries it for offline replay."""
    from tests.observe.live_support import HandRound, ingest

    settings.TRAITDECK_REACT_AGENT_VERSION = "v3"
    hand = HandRound(turn_id="turn-v2", iteration=0).add(
        "round.started", after_ms=0, max_actions=2, react_version="v2"
    )
    ingest(hand.call(0, "workspace_jobs.launch_background_job").generation().finished().events)
    page = viewer_client.get(
        "/policy/impact/rounds/main/turn-v2/0/?baseline=1&candidate=draft"
    ).content.decode()
    assert " ".join(text_of(page, "p", id="impact-round-react").split()) == (
        "React agent assumed v2 (from the round's react_version)"
    )
    report = post(viewer_client, {"baseline": "1"}).json()
    assert report["react_version"] == "v3"
    assert report["rounds_by_react_version"]["v2"] == 1
    export = viewer_client.get("/api/v1/rounds/export.jsonl?turn=turn-v2")
    lines = [json.loads(line) for line in b"".join(export).decode().splitlines()]
    assert [line["react_version"] for line in lines] == ["v2"]
