"""The PostgreSQL layout for volume: rounds, their events and their tool rows partitioned by day.

Each of the three tables is partitioned by range of ``day`` (:attr:`observe.models.Round.day`,
the UTC day the round started as first seen; its events and tool rows carry the round's day), so
a round and all its events sit in one partition even when the round straddles midnight, and
retention drops whole days (``DETACH`` + ``DROP``: no row deleted, no vacuum debt). A ``DEFAULT``
partition takes a day nobody created yet: an event is never refused for its time.
:func:`partitions_ensure` (``manage.py partitions_upkeep``, ``migrate``) creates days ahead and
moves what the default partition holds of a day into that day's partition.

Idempotency without a global unique index: ``(event_id, day)`` is unique in each partition and a
repeated event goes to its round's partition (ingest reads the round before writing), so an
``event_id`` is stored once while its round is kept (docs/api.md).

SQLite keeps one plain table each (the ORM code and ``observe.store`` serve both).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from typing import Any

from django.db import connection as default_connection

#: The partitioned tables, the round's first: partitions are created in this order and dropped
#: in the reverse one.
TABLES = ("observe_round", "observe_roundtool", "observe_event")
#: Days created ahead of today by ``partitions_upkeep`` (and by ``migrate``).
AHEAD_DAYS = 7


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def _day_of(name: str, table: str) -> date | None:
    suffix = name[len(table) + 2 :]
    if not name.startswith(f"{table}_p") or len(suffix) != 8 or not suffix.isdigit():
        return None
    return date(int(suffix[:4]), int(suffix[4:6]), int(suffix[6:]))


#: :func:`partitioned` per database (alias and name): asked once, then known.
_known: dict[tuple[str, str], bool] = {}


def partitioned(connection: Any = None) -> bool:
    """Whether this database holds the partitioned layout (PostgreSQL after migration 0011)."""
    connection = connection or default_connection
    if connection.vendor != "postgresql":
        return False
    where = (connection.alias, str(connection.settings_dict.get("NAME")))
    known = _known.get(where)
    if known is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT relkind FROM pg_class WHERE relname = %s", [TABLES[0]])
            row = cursor.fetchone()
        known = row is not None and row[0] == "p"
        if known:  # a layout that may yet change (before migrate) is asked again
            _known[where] = known
    return known


def forget_layout() -> None:
    """Ask again (a test that rebuilds the tables)."""
    _known.clear()


def partition_days(connection: Any = None) -> list[date]:
    """The days that have a partition of their own (of the round table), oldest first."""
    connection = connection or default_connection
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s",
            [TABLES[0]],
        )
        names = [row[0] for row in cursor.fetchall()]
    return sorted(day for day in (_day_of(name, TABLES[0]) for name in names) if day is not None)


def partitions_ensure(days: Iterable[date], connection: Any = None) -> list[date]:
    """Create the partitions of ``days`` that do not exist yet, each day of the three tables in
    one transaction; rows of such a day already in the default partition move into it. Returns
    the days created."""
    from django.db import transaction

    connection = connection or default_connection
    have = set(partition_days(connection))
    made = []
    for day in sorted(set(days) - have):
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            for table in TABLES:
                _create(cursor, table, day)
        made.append(day)
    return made


def _create(cursor: Any, table: str, day: date) -> None:
    name, default = partition_name(table, day), f"{table}_default"
    bounds = [day.isoformat(), (day + timedelta(days=1)).isoformat()]
    cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {default} WHERE day = %s)", [day])
    if not cursor.fetchone()[0]:
        cursor.execute(
            f"CREATE TABLE {name} PARTITION OF {table} FOR VALUES FROM (%s) TO (%s)", bounds
        )
        return
    # The default partition holds rows of this day: move them, then attach (the partition
    # constraint of the default would refuse a new partition over its own rows).
    cursor.execute(f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS)")
    cursor.execute(
        f"WITH moved AS (DELETE FROM {default} WHERE day = %s RETURNING *)"
        f" INSERT INTO {name} SELECT * FROM moved",
        [day],
    )
    cursor.execute(
        f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)", bounds
    )


def upkeep_days(today: date, ahead: int = AHEAD_DAYS) -> list[date]:
    """Yesterday, today and ``ahead`` days after it."""
    return [today + timedelta(days=offset) for offset in range(-1, ahead + 1)]


def partition_drop(day: date, connection: Any = None) -> int:
    """Detach and drop the day's partitions (events and tool rows first, then the rounds), inside
    the caller's transaction; returns how many rounds it held."""
    connection = connection or default_connection
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partition_name(TABLES[0], day)}")
        rounds = int(cursor.fetchone()[0])
        for table in reversed(TABLES):
            name = partition_name(table, day)
            cursor.execute(f"ALTER TABLE {table} DETACH PARTITION {name}")
            cursor.execute(f"DROP TABLE {name}")
    return rounds


# --- migration 0011: today's plain tables → the partitioned layout (PostgreSQL only) ----------

#: Keys whose value the event row or its round holds: left out of the stored JSON.
_STRIPPED = ("event_id", "type", "agent", "turn_id", "iteration")


def _index_defs(cursor: Any, table: str, skip: Sequence[str]) -> list[str]:
    """The CREATE INDEX statements of ``table``'s plain (not unique) indexes, for the new table."""
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexdef NOT LIKE"
        " 'CREATE UNIQUE%%'",
        [f"{table}_old"],
    )
    return [
        definition.replace(f" ON public.{table}_old ", f" ON public.{table} ").replace(
            f" ON {table}_old ", f" ON {table} "
        )
        for name, definition in cursor.fetchall()
        if name not in skip
    ]


def convert(connection: Any, today: date) -> None:
    """Rebuild the round, tool-row and event tables as partitioned tables, every row kept (in
    the migration's transaction). Days: one partition per day the rounds started on, and
    yesterday to :data:`AHEAD_DAYS` ahead; the event JSON loses what its row and round hold."""
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
        indexes = {}
        for table in TABLES:
            # Django's varchar_pattern_ops index on event_id serves LIKE, which nothing asks.
            indexes[table] = _index_defs(
                cursor, table, skip=("observe_event_event_id_98bc02bd_like",)
            )
        for table in TABLES:
            cursor.execute(
                f"CREATE TABLE {table} (LIKE {table}_old INCLUDING DEFAULTS)"
                " PARTITION BY RANGE (day)"
            )
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN day SET NOT NULL")
            cursor.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")
        # Ingest has only ever stored canonical UUIDs; a row written around it would fail the
        # cast below mid-way: say so plainly instead (the migration is one transaction, so
        # nothing has changed when it stops).
        cursor.execute(
            "SELECT count(*), min(event_id) FROM observe_event_old WHERE event_id !~"
            " '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'"
        )
        bad, example = cursor.fetchone()
        if bad:
            raise RuntimeError(
                f"{bad} stored events have an event_id that is not a canonical UUID"
                f" (e.g. {example!r}), which ingest never stores: fix or delete those rows,"
                " then migrate again. Nothing was changed."
            )
        # A UUID in 16 bytes instead of 37 (ingest only stores canonical UUIDs), and the event's
        # JSON as compact text (``json``): nothing queries inside it, and text is a fifth
        # smaller than ``jsonb``'s binary form for these small objects.
        cursor.execute(
            "ALTER TABLE observe_event ALTER COLUMN event_id TYPE uuid USING event_id::uuid"
        )
        cursor.execute("ALTER TABLE observe_event ALTER COLUMN data TYPE json USING data::json")
        cursor.execute(
            "SELECT DISTINCT (started_at AT TIME ZONE 'UTC')::date FROM observe_round_old"
        )
        days = {row[0] for row in cursor.fetchall()} | set(upkeep_days(today))
        for day in sorted(days):
            for table in TABLES:
                _create(cursor, table, day)
        cursor.execute(
            "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
            " WHERE attrelid = 'observe_round'::regclass AND attnum > 0 AND NOT attisdropped"
            " AND attname <> 'day'"
        )
        round_columns = cursor.fetchone()[0]
        cursor.execute(
            f"INSERT INTO observe_round ({round_columns}, day) SELECT {round_columns},"
            " (started_at AT TIME ZONE 'UTC')::date FROM observe_round_old"
        )
        cursor.execute(
            "INSERT INTO observe_roundtool (id, round_id, tool_id, day)"
            " SELECT t.id, t.round_id, t.tool_id, r.day FROM observe_roundtool_old t"
            " JOIN observe_round r ON r.id = t.round_id"
        )
        stripped = "".join(f" - '{key}'" for key in _STRIPPED)
        cursor.execute(
            "INSERT INTO observe_event (id, event_id, type, ts, data, round_id, day)"
            " SELECT e.id, e.event_id::uuid, e.type, e.ts,"
            # ts only where the column gives it back as it was sent (format_ts).
            f" CASE WHEN e.data->>'ts' = to_char(e.ts AT TIME ZONE 'UTC',"
            f" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') THEN e.data{stripped} - 'ts'"
            f" ELSE e.data{stripped} END, e.round_id, r.day"
            " FROM observe_event_old e JOIN observe_round r ON r.id = e.round_id"
        )
        for table in reversed(TABLES):
            cursor.execute(f"DROP TABLE {table}_old CASCADE")
        for table in TABLES:
            _number_from_max(cursor, table)
        # Unique keys hold the partition key: unique per day, global by the way ingest writes.
        cursor.execute(
            "ALTER TABLE observe_round ADD CONSTRAINT observe_round_pkey PRIMARY KEY (id, day)"
        )
        cursor.execute(
            "ALTER TABLE observe_round ADD CONSTRAINT round_key"
            " UNIQUE (agent, turn_id, iteration, day)"
        )
        cursor.execute(
            "ALTER TABLE observe_round ADD CONSTRAINT observe_round_version_key"
            " UNIQUE (version, day)"
        )
        # Tool rows: no primary-key index either (they are read by round and by tool id).
        cursor.execute(
            "ALTER TABLE observe_roundtool ADD CONSTRAINT round_tool_unique"
            " UNIQUE (round_id, tool_id, day)"
        )
        # Events: no primary key index (nothing looks an event up by its id); the event_id
        # index is the idempotency key.
        cursor.execute(
            "ALTER TABLE observe_event ADD CONSTRAINT observe_event_event_id_key"
            " UNIQUE (event_id, day)"
        )
        for table in TABLES:
            for definition in indexes[table]:
                cursor.execute(definition)
        # A round's events are read by round only (never in ts order from the index): the
        # round alone, whose ~10 entries per round B-tree deduplication folds into one.
        cursor.execute("DROP INDEX event_round_ts")
        cursor.execute("CREATE INDEX event_round_ts ON observe_event (round_id)")


def revert(connection: Any) -> None:
    """Migration 0011 backwards: plain tables again, with today's keys and indexes and each
    event's whole JSON, every row kept (``day`` stays, nullable, for 0010 to remove)."""
    with connection.cursor() as cursor:
        indexes = {}
        for table in TABLES:
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexdef"
                " NOT LIKE 'CREATE UNIQUE%%'",
                [table],
            )
            indexes[table] = [
                definition.replace(f" ON ONLY public.{table} ", f" ON public.{table} ")
                for name, definition in cursor.fetchall()
                if name != "event_round_ts"
            ]
        for table in TABLES:
            cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
            cursor.execute(f"CREATE TABLE {table} (LIKE {table}_old INCLUDING DEFAULTS)")
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN day DROP NOT NULL")
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id DROP DEFAULT")
        cursor.execute(
            "ALTER TABLE observe_event ALTER COLUMN event_id TYPE varchar(36) USING event_id::text"
        )
        cursor.execute("ALTER TABLE observe_event ALTER COLUMN data TYPE jsonb USING data::jsonb")
        cursor.execute("INSERT INTO observe_round SELECT * FROM observe_round_old")
        cursor.execute("INSERT INTO observe_roundtool SELECT * FROM observe_roundtool_old")
        cursor.execute(
            "INSERT INTO observe_event (id, event_id, type, ts, data, round_id, day)"
            " SELECT e.id, e.event_id::text, e.type, e.ts, jsonb_build_object('event_id',"
            " e.event_id::text, 'type', e.type, 'ts', to_char(e.ts AT TIME ZONE 'UTC',"
            " 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'agent', r.agent, 'turn_id', r.turn_id,"
            " 'iteration', r.iteration) || e.data::jsonb, e.round_id, e.day"
            " FROM observe_event_old e JOIN observe_round r ON r.id = e.round_id"
        )
        for table in reversed(TABLES):
            cursor.execute(f"DROP TABLE {table}_old CASCADE")
        for table in TABLES:
            _number_from_max(cursor, table)
            cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY (id)")
        for statement in (
            "ALTER TABLE observe_round ADD CONSTRAINT round_key UNIQUE (agent, turn_id, iteration)",
            "ALTER TABLE observe_round ADD CONSTRAINT observe_round_version_key UNIQUE (version)",
            "ALTER TABLE observe_roundtool ADD CONSTRAINT round_tool_unique"
            " UNIQUE (round_id, tool_id)",
            "ALTER TABLE observe_event ADD CONSTRAINT observe_event_event_id_key UNIQUE (event_id)",
            "CREATE INDEX observe_event_event_id_98bc02bd_like ON observe_event"
            " (event_id varchar_pattern_ops)",
            "CREATE INDEX event_round_ts ON observe_event (round_id, ts)",
        ):
            cursor.execute(statement)
        for table in ("observe_roundtool", "observe_event"):
            cursor.execute(
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_round_id_fk FOREIGN KEY (round_id)"
                " REFERENCES observe_round (id) DEFERRABLE INITIALLY DEFERRED"
            )
        for table in TABLES:
            for definition in indexes[table]:
                cursor.execute(definition)


def _number_from_max(cursor: Any, table: str) -> None:
    """Give a rebuilt ``table`` its own id sequence, continuing after the ids it holds."""
    sequence = f"{table}_id_seq"
    cursor.execute(f"CREATE SEQUENCE {sequence} OWNED BY {table}.id")
    cursor.execute(
        f"SELECT setval('{sequence}', COALESCE((SELECT max(id) FROM {table}), 0) + 1, false)"
    )
    cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id SET DEFAULT nextval('{sequence}')")
