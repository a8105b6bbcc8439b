"""On PostgreSQL a round's assembly and an event's JSON are stored packed (issue 39,
``observe.domain.packing``): what is read back is what was ingested, migration 0013 turns the
JSON columns into bytes and back with every value kept, and a round stored before is packed the
next time ingest writes it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.db import connection

from observe.models import Event, Round
from observe.partitions import forget_layout
from tests.observe.live_support import HandRound, ingest, simulated

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the packed columns are PostgreSQL's"
)


def first_bytes(table: str, column: str) -> dict[int, int]:
    """How many rows of ``table`` start ``column`` with each byte (1: packed; 123: JSON text)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT get_byte({column}, 0), count(*) FROM {table} GROUP BY 1")
        return dict(cursor.fetchall())


def column_type(table: str, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT data_type FROM information_schema.columns"
            " WHERE table_name = %s AND column_name = %s",
            [table, column],
        )
        return str(cursor.fetchone()[0])


def stored() -> tuple[dict[int, Any], dict[str, Any]]:
    return (
        dict(Round.objects.values_list("pk", "assembly")),
        dict(Event.objects.values_list("event_id", "data")),
    )


@pytest.mark.django_db
def test_ingested_rounds_are_stored_packed_at_under_half_their_json() -> None:
    for events in simulated(40):
        ingest(events)
    assert first_bytes("observe_round", "assembly") == {1: 40}
    assert set(first_bytes("observe_event", "data")) == {1}
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, octet_length(assembly) FROM observe_round")
        sizes = dict(cursor.fetchall())
    for pk, assembly in Round.objects.values_list("pk", "assembly"):
        assert sizes[pk] < len(orjson.dumps(assembly)) / 2


@pytest.mark.django_db(transaction=True)
def test_migration_0013_keeps_every_value_both_ways_and_ingest_packs_old_rounds() -> None:
    for events in simulated(12):
        ingest(events)
    before = stored()

    call_command("migrate", "observe", "0012", verbosity=0)
    forget_layout()
    assert (column_type("observe_round", "assembly"), column_type("observe_event", "data")) == (
        "jsonb",
        "json",
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, assembly::text FROM observe_round")
        assert {pk: orjson.loads(text) for pk, text in cursor.fetchall()} == before[0]

    call_command("migrate", "observe", verbosity=0)
    forget_layout()
    assert column_type("observe_round", "assembly") == "bytea"
    # Nothing rewritten: every value is its JSON text's bytes, and reads as it did.
    assert first_bytes("observe_round", "assembly") == {ord("{"): 12}
    assert stored() == before

    # A new event of a round stored before: the round is written again, packed.
    old = Round.objects.order_by("pk").first()
    assert old is not None
    hand = HandRound(
        agent=old.agent, turn_id=old.turn_id, iteration=old.iteration, start=old.started_at
    )
    ingest(hand.add("generation.finished", attempt=7).events)
    assert first_bytes("observe_round", "assembly") == {ord("{"): 11, 1: 1}
    old.refresh_from_db()
    assert "7" in old.assembly["gen"]
    assert {k: v for k, v in old.assembly.items() if k != "gen"} == {
        k: v for k, v in before[0][old.pk].items() if k != "gen"
    }
