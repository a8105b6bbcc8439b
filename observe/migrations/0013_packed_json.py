# Issue 39: on PostgreSQL a round's assembly and an event's JSON are stored packed
# (observe.domain.packing: bytea, zstd against a dictionary of the project's words). The
# columns change type in place, each value kept as the bytes of its JSON text, which the packed
# field reads as they are (no value is rewritten here: a round is packed the next time ingest
# writes it, an event never is — the rows age out with retention). SQLite keeps its columns.

from typing import Any

from django.db import migrations

import observe.fields

#: (table, column, the type before).
COLUMNS = (("observe_round", "assembly", "jsonb"), ("observe_event", "data", "json"))


def to_bytes(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, column, _ in COLUMNS:
            cursor.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} TYPE bytea"
                f" USING convert_to({column}::text, 'UTF8')"
            )


def to_json(apps: Any, schema_editor: Any) -> None:
    """Back to JSON columns: the packed values unpacked first (in batches, by primary key)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    from observe.domain.packing import VERSION, unpack

    with schema_editor.connection.cursor() as cursor:
        for table, column, before in COLUMNS:
            last = 0
            while True:
                cursor.execute(
                    f"SELECT id, day, {column} FROM {table}"
                    f" WHERE id > %s AND get_byte({column}, 0) = %s ORDER BY id LIMIT 5000",
                    [last, VERSION],
                )
                rows = cursor.fetchall()
                if not rows:
                    break
                cursor.executemany(
                    f"UPDATE {table} SET {column} = convert_to(%s, 'UTF8')"
                    " WHERE id = %s AND day = %s",
                    [(_text(unpack(value)), pk, day) for pk, day, value in rows],
                )
                last = rows[-1][0]
            cursor.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {before}"
                f" USING convert_from({column}, 'UTF8')::{before}"
            )


def _text(value: Any) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")


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
