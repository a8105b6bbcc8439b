# Issue 39: on PostgreSQL a round's assembly and an event's JSON are stored packed
# (observe.domain.packing: bytea, zstd against a dictionary of the project's words). The
# columns change type in place, each value kept as the bytes of its JSON text, which the packed
# field reads as they are (no value is rewritten here: a round is packed the next time ingest
# writes it, an event never is — the rows age out with retention). SQLite keeps its columns.

from typing import Any

from django.db import migrations

import observe.fields

#: (table, column, the type before, the key that finds a row with its day).
COLUMNS = (
    ("observe_round", "assembly", "jsonb", "id"),
    ("observe_event", "data", "json", "event_id"),
)


def to_bytes(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, column, _, _ in COLUMNS:
            cursor.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} TYPE bytea"
                f" USING convert_to({column}::text, 'UTF8')"
            )


def to_json(apps: Any, schema_editor: Any) -> None:
    """Back to JSON columns: each packed value replaced by its JSON text's bytes first (one pass
    over the packed rows, updated by their unique key and day), then the type changed back."""
    if schema_editor.connection.vendor != "postgresql":
        return
    from observe.domain.packing import VERSION, json_of

    raw = schema_editor.connection.connection  # psycopg's: a server-side cursor reads in batches
    for table, column, before, key in COLUMNS:
        with raw.cursor(name=f"packed_{table}") as reading, raw.cursor() as writing:
            reading.execute(
                f"SELECT {key}, day, {column} FROM {table} WHERE get_byte({column}, 0) = %s",
                [VERSION],
            )
            while rows := reading.fetchmany(5000):
                writing.executemany(
                    f"UPDATE {table} SET {column} = %s WHERE {key} = %s AND day = %s",
                    [(json_of(value), found, day) for found, day, value in rows],
                )
        # Once the reading cursor is closed (a table it reads cannot be altered).
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {before}"
                f" USING convert_from({column}, 'UTF8')::{before}"
            )


class Migration(migrations.Migration):
    dependencies = [
        ("observe", "0012_round_count_bucket"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(to_bytes, to_json, elidable=False)],
            state_operations=[
                migrations.AlterField(
                    model_name="event", name="data", field=observe.fields.PackedJSONField()
                ),
                migrations.AlterField(
                    model_name="round",
                    name="assembly",
                    field=observe.fields.PackedJSONField(default=dict),
                ),
            ],
        ),
    ]
