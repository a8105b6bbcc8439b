"""The publish page's impact: changes grouped by kind, the riskiest first, each kind explained,
rejection codes in words with the code beside them, a filter; every change listed in the page."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from policy.domain.yaml_io import load_policy
from policy.models import PolicyVersion
from policy.services import draft_replace
from policy.versions import policy_publish
from simulator.runtime import Simulator
from tests.markup import find_all, page_text, text_of
from tests.observe.live_support import ingest

pytestmark = pytest.mark.django_db

SAMPLE = (
    Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
).read_text(encoding="utf-8")
#: Upserts may now follow exploration (rejections lost); the background job no longer starts
#: early (early starts lost).
CHANGED = SAMPLE.replace(
    "upsert_object:\n                strategy: [exploitation]",
    "upsert_object:\n                strategy: [exploration, exploitation]",
    1,
).replace(
    "launch_background_job:\n                strategy: [neutral]",
    "launch_background_job:\n                strategy: [exploration]",
    1,
)


@pytest.fixture
def recorded() -> None:
    draft_replace(data=load_policy(SAMPLE).data, base_revision=None)
    version = policy_publish(actor="cli", message="sample", confirm_warnings=True)
    PolicyVersion.objects.filter(pk=version.pk).update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    simulator = Simulator(load_policy(SAMPLE).data, seed=7)
    start = timezone.now() - timedelta(minutes=30)
    for number in range(120):
        ingest(simulator.next_round(start + timedelta(seconds=10 * number))[1])
    draft_replace(data=load_policy(CHANGED).data, base_revision=None)


def group_headings(page: str) -> list[str]:
    """The headings of the impact's groups of changes, in page order."""
    return [group.find("h3").text for group in find_all(page, "section", class_="impact-group")]


def test_it_lists_the_riskiest_changes_first_explained_and_in_words(
    recorded: None, publisher_client: Client
) -> None:
    page = publisher_client.get("/policy/publish/").content.decode()
    headings = group_headings(page)
    lost = [i for i, text in enumerate(headings) if text.endswith("no longer rejected")]
    early = [i for i, text in enumerate(headings) if text.endswith("early starts lost")]
    assert lost
    assert early
    assert lost[0] < early[0]
    assert "the runtime rejected it; now it accepts it and the tool runs" in page_text(page)
    assert "cannot follow the first action" in page_text(page)  # the rule in words
    rules = [code.text for code in find_all(page, "code", class_="muted")]
    assert "multi_action_bundle_strategy_incompatible" in rules
    assert "lists them all" not in page_text(page)

    only_early = publisher_client.get("/policy/publish/?impact_kind=early_lost").content.decode()
    headings = group_headings(only_early)
    assert [text for text in headings if text.endswith("early starts lost")]
    assert not [text for text in headings if text.endswith("no longer rejected")]


def test_the_impact_predicts_under_the_react_agent_the_instance_assumes_and_says_so(
    recorded: None, publisher_client: Client, settings: object
) -> None:
    """Under v3 (the suite's pin) the change loses early starts; an instance that assumes v2
    (KDCube's default) predicts none to lose, and the publish page's badge says v2."""
    page = publisher_client.get("/policy/publish/").content.decode()
    assert " ".join(text_of(page, "p", id="impact-react").split()).startswith(
        "React agent assumed v3 (from the setting TRAITDECK_REACT_AGENT_VERSION;"
    )
    settings.TRAITDECK_REACT_AGENT_VERSION = "v2"  # type: ignore[attr-defined]
    page = publisher_client.get("/policy/publish/").content.decode()
    badge = " ".join(text_of(page, "p", id="impact-react").split())
    assert badge.startswith("React agent assumed v2 (from the setting")
    assert badge.endswith(" rounds under v2)")
    assert not [text for text in group_headings(page) if text.endswith("early starts lost")]
    data = publisher_client.post(
        "/api/v1/policy/impact", data="{}", content_type="application/json"
    ).json()
    assert (data["react_version"], data["react_version_source"]) == (
        "v2",
        "the setting TRAITDECK_REACT_AGENT_VERSION",
    )
