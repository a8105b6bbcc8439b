"""The admin shows rounds and events, filtered by agent and outcome, and changes nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from observe.models import Event, Round
from observe.services import events_ingest
from tests.markup import find_all
from tests.observe.ingest_support import event, started

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored() -> None:
    events_ingest(
        [
            started(agent="main"),
            event("round.finished", agent="main", outcome="failed", ts="2026-11-29T18:00:01Z"),
            started(agent="other"),
        ]
    )


def agents(response: object) -> set[str]:
    objects = response.context["cl"].result_list  # type: ignore[attr-defined]
    return {obj.agent if isinstance(obj, Round) else obj.round.agent for obj in objects}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/admin/observe/round/", {"main", "other"}),
        ("/admin/observe/round/?agent=main", {"main"}),
        ("/admin/observe/round/?outcome=failed", {"main"}),
        ("/admin/observe/event/?round__agent=other", {"other"}),
        ("/admin/observe/event/?type=round.finished", {"main"}),
    ],
)
def test_the_lists_filter_by_agent_and_outcome(
    url: str, expected: set[str], stored: None, admin_client: Client
) -> None:
    response = admin_client.get(url)
    assert response.status_code == 200
    assert agents(response) == expected


def test_nothing_can_be_added_changed_or_deleted(stored: None, admin_client: Client) -> None:
    row = Round.objects.first()
    stored_event = Event.objects.first()
    assert row is not None
    assert stored_event is not None
    assert admin_client.get("/admin/observe/round/add/").status_code == 403
    assert admin_client.post(f"/admin/observe/round/{row.pk}/delete/").status_code == 403
    page = admin_client.get(f"/admin/observe/round/{row.pk}/change/")
    assert page.status_code == 200  # viewable, read-only
    assert find_all(page.content.decode(), "form", id="round_form")
    assert not find_all(page.content.decode(), name="_save")
    admin_client.post(f"/admin/observe/event/{stored_event.pk}/change/", {"type": "x"})
    stored_event.refresh_from_db()
    assert stored_event.type != "x"
