"""A store that cannot take a write now (SQLite "database is locked", a PostgreSQL lock timeout)
answers 503 with ``Retry-After``, stores nothing of the request, and the same request sent again
once the store is free succeeds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, connections
from django.test import Client

from observe.models import Event
from tests.observe.ingest_support import post_events, token

pytestmark = pytest.mark.django_db(transaction=True)


#: The tables a write of these tests touches: PostgreSQL locks them all, SQLite its whole file.
LOCKED_TABLES = ("observe_event", "observe_round", "observe_roundtool", "policy_policydraft")


@contextmanager
def other_writer() -> Iterator[Any]:
    """A second connection to the same database that holds the write lock while the test runs.
    On PostgreSQL the request's connection waits at most a short ``lock_timeout`` for it (the
    deployed default, ``DATABASE_LOCK_TIMEOUT_MS``, is 5 s)."""
    other = connections.create_connection("default")
    other.ensure_connection()
    cursor = other.connection.cursor()
    if other.vendor == "postgresql":
        cursor.execute("BEGIN")
        existing = set(other.introspection.table_names())
        tables = ", ".join(name for name in LOCKED_TABLES if name in existing)
        cursor.execute(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
        with connection.cursor() as own:
            own.execute("SET lock_timeout = '300ms'")
    else:
        cursor.execute("BEGIN IMMEDIATE")
        cursor.execute("DELETE FROM observe_event WHERE 0")  # take the write lock for real
    try:
        yield other
    finally:
        other.connection.rollback()
        other.close()
        if connection.vendor == "postgresql":
            with connection.cursor() as own:
                own.execute("RESET lock_timeout")


def _event(turn: str, index: int) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "ts": "2026-11-29T18:00:00Z",
        "agent": "main",
        "turn_id": turn,
        "iteration": 0,
        "type": "round.started" if index == 0 else "generation.finished",
        "max_actions": 3,
    }


def test_ingest_while_locked_is_503_with_retry_after_and_stores_nothing() -> None:
    client = Client()
    secret = token("events:write")
    batch = [_event("t-busy", i) for i in range(3)]
    with other_writer():
        response = post_events(client, batch, secret)
    assert response.status_code == 503, response.content
    assert response["Retry-After"].isdigit()
    assert "nothing was stored" in response.json()["error"]
    assert Event.objects.count() == 0
    again = post_events(client, batch, secret)
    assert again.status_code == 200
    assert again.json() == {"accepted": 3, "duplicates": 0, "rejected": []}


def test_an_edit_while_locked_is_503_and_the_draft_is_unchanged(admin_client: Client) -> None:
    with other_writer():
        response = admin_client.post(
            "/api/v1/agents", data={"name": "busy"}, content_type="application/json"
        )
    assert response.status_code == 503, response.content
    assert response["Retry-After"].isdigit()
    listing = admin_client.get("/api/v1/agents").json()
    assert listing["revision"] == 0
    assert listing["agents"] == []
    again = admin_client.post(
        "/api/v1/agents", data={"name": "busy"}, content_type="application/json"
    )
    assert again.status_code == 201
