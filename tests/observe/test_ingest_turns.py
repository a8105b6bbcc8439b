"""Batches of one process are written one at a time (observe.services._WRITE_LOCK): a batch
that cannot get its turn in time answers 503 with ``Retry-After`` and stores nothing, like a
locked database."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from observe import services
from observe.models import Event
from tests.observe.ingest_support import post_events, token

pytestmark = pytest.mark.django_db


def _event(turn: str) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "ts": "2026-11-29T18:00:00Z",
        "agent": "main",
        "turn_id": turn,
        "iteration": 0,
        "type": "round.started",
        "max_actions": 3,
    }


def test_a_batch_that_waits_too_long_for_its_turn_is_503_and_stores_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(services, "WRITE_WAIT_S", 0.05)
    client = Client()
    secret = token("events:write")
    batch = [_event("t-turn")]
    with services._WRITE_LOCK:  # another batch of this process is being written
        response = post_events(client, batch, secret)
    assert response.status_code == 503, response.content
    assert response["Retry-After"].isdigit()
    assert "nothing was stored" in response.json()["error"]
    assert Event.objects.count() == 0
    again = post_events(client, batch, secret)
    assert again.json() == {"accepted": 1, "duplicates": 0, "rejected": []}
