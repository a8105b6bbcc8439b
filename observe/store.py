"""The SQL of ingest: plain statements run with ``executemany``, one per table and batch.

A queryset costs more to build than these queries take to run on every POST, so ingest reads the
rounds it touches and writes rounds, events and tool rows here, with each field's own conversion
(SQLite's few done directly). ``observe.services`` decides what to write; this module only knows
how.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson
import psycopg
from django.conf import settings
from django.db import connection, models
from django.db.models import F

from core.timewindow import format_ts
from core.vocabulary import COUNT_KEYS, KIND_COUNTERS
from observe.domain.events import Event
from observe.domain.facts import RoundFacts
from observe.domain.packing import pack, unpack
from observe.domain.rounds import Assembly, AssemblySummary
from observe.models import Event as StoredEvent
from observe.models import IngestCount, Round, RoundTool, StreamCounter
from observe.partitions import partitioned


def hold_ingest_lock() -> None:
    """Lock the stream counter's row (inside the caller's transaction) as a batch's
    :func:`next_versions` does, so no batch merges until the caller commits: for work that
    reads, changes and writes what ingest also writes (the tool-health tallies)."""
    if connection.vendor != "sqlite":
        list(StreamCounter.objects.select_for_update().filter(pk=StreamCounter.SINGLETON_ID))
    else:
        # SQLite has no row locks: take the database's write lock now (a write), not at the
        # first insert.
        StreamCounter.objects.filter(pk=StreamCounter.SINGLETON_ID).update(value=F("value"))


def next_versions(count: int) -> list[int]:
    """Take ``count`` consecutive version numbers (inside the caller's transaction): one
    ``UPDATE … RETURNING`` (SQLite ≥ 3.35, PostgreSQL), which also locks the counter row until
    commit, so versions are handed out in commit order."""
    table = connection.ops.quote_name(StreamCounter._meta.db_table)
    sql = f"UPDATE {table} SET value = value + %s WHERE id = %s RETURNING value"
    with connection.cursor() as cursor:
        cursor.execute(sql, [count, StreamCounter.SINGLETON_ID])
        row = cursor.fetchone()
    if row is None:  # the first batch ever
        StreamCounter.objects.get_or_create(pk=StreamCounter.SINGLETON_ID)
        return next_versions(count)
    last = int(row[0])
    return list(range(last - count + 1, last + 1))


RoundKey = tuple[str, str, int]

#: What becomes of a posted event: stored, a repeat of a stored one, or refused (by its index).
INGEST_RESULTS = ("accepted", "duplicate", "refused")


def ingest_count(counts: Mapping[str, int]) -> None:
    """Add a batch's ``counts`` (by :data:`INGEST_RESULTS` name) to the stored totals, inside
    the batch's transaction: one upsert (``INSERT … ON CONFLICT … DO UPDATE``, SQLite and
    PostgreSQL alike) of the names that change, one statement."""
    changed = [(name, amount) for name, amount in counts.items() if amount]
    if not changed:
        return
    quote = connection.ops.quote_name
    table = quote(IngestCount._meta.db_table)
    name, value = quote("name"), quote("value")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({name}, {value})"
            f" VALUES {', '.join(['(%s, %s)'] * len(changed))} ON CONFLICT ({name})"
            f" DO UPDATE SET {value} = {table}.{value} + excluded.{value}",
            [item for pair in changed for item in pair],
        )


#: Ids per ``IN (…)`` list: well under every database's limit on statement parameters.
_IDS_PER_QUERY = 500

#: Keys of an event's JSON that its row (``event_id``, ``type``, ``ts``) or its round (the rest)
#: already holds: the partitioned layout stores the JSON without them (:func:`event_whole`).
ROW_KEYS = ("event_id", "type", "ts", "agent", "turn_id", "iteration")


def event_stored_json(data: Mapping[str, Any]) -> dict[str, Any]:
    """What the partitioned layout stores of an event's JSON: without :data:`ROW_KEYS`."""
    return {key: value for key, value in data.items() if key not in ROW_KEYS}


def event_whole(
    data: Mapping[str, Any], event_id: Any, event_type: str, ts: datetime, key: RoundKey
) -> dict[str, Any]:
    """An event's JSON as posted (normalized), from its stored JSON, its row and its round's key;
    a stored JSON that still holds a key (SQLite, rows older than the partitioned layout) keeps
    its own value."""
    if "event_id" in data and "agent" in data and "ts" in data:
        return dict(data)
    agent, turn_id, iteration = key
    return {
        "event_id": str(event_id),
        "type": event_type,
        "ts": format_ts(_db_datetime(ts)),
        "agent": agent,
        "turn_id": turn_id,
        "iteration": iteration,
        **data,
    }


def stored_event_data(
    ids: Sequence[str],
    events: Mapping[str, tuple[RoundKey, datetime]],
    *,
    days: Mapping[RoundKey, date],
    wide: bool = False,
) -> list[tuple[str, Any]]:
    """``(event_id, data)`` of the stored events among ``ids``: plain SQL (a queryset costs more
    to build than this query takes to run on every POST). ``events``: each id's round key and
    time; on the partitioned layout an id is looked for in its round's partition when its round
    is stored (``days``: the stored rounds' partition days, as :func:`held_rounds` read them;
    an event of a new round is not looked for), and with ``wide`` also in the partitions of the
    days its time names (``ts``'s and the ones before and after): an id reused by another round
    collides with it in the day's unique key, and ingest triages again, wide. Other layouts
    look every id up in the one unique index."""
    if not ids:
        return []
    if partitioned():
        return _stored_in_days(ids, events, days, wide)
    data_field = StoredEvent._meta.get_field("data")
    quote = connection.ops.quote_name
    table, event_id, data = (quote(n) for n in (StoredEvent._meta.db_table, "event_id", "data"))
    if connection.vendor == "sqlite":
        # The ids as one JSON list, joined in this order: each is a search of the unique index
        # whatever the statistics say (after an ANALYZE of a small table, SQLite scanned the
        # whole table for an IN list, so ingest slowed with the history).
        queries = [
            (
                f"SELECT e.{event_id}, e.{data} FROM json_each(%s) AS j"
                f" CROSS JOIN {table} AS e ON e.{event_id} = j.value",
                [json.dumps(list(ids))],
            )
        ]
    else:
        step = _IDS_PER_QUERY
        chunks = [ids[first : first + step] for first in range(0, len(ids), step)]
        queries = [
            (
                f"SELECT {event_id}, {data} FROM {table}"
                f" WHERE {event_id} IN ({', '.join(['%s'] * len(chunk))})",
                list(chunk),
            )
            for chunk in chunks
        ]
    found: list[tuple[str, Any]] = []
    with connection.cursor() as cursor:
        for sql, params in queries:
            cursor.execute(sql, params)
            found.extend(
                (stored_id, data_field.from_db_value(value, None, connection))
                for stored_id, value in cursor.fetchall()
            )
    return found


def _stored_in_days(
    ids: Sequence[str],
    events: Mapping[str, tuple[RoundKey, datetime]],
    days: Mapping[RoundKey, date],
    wide: bool,
) -> list[tuple[str, Any]]:
    # A stored event lives in its round's partition (ingest writes every event of a round into
    # the round's day), and an event whose round is not stored cannot be a repeat while its
    # round is kept (docs/api.md, "Idempotency"). So the batch's rounds are looked up first,
    # and each stored round's day is asked only for that round's ids: events of new rounds
    # probe nothing. (Looking in the days the events' times name probed each id in three
    # days' random-UUID indexes; once the store outgrew memory, those were disk reads: 16 ms a
    # batch at 100M events.) ``wide``, after a collision: an id reused by another round landed
    # in the same day's unique key; look for every id in the days its time names as well.
    by_day: dict[date, set[str]] = {}
    for event_id in ids:
        round_key, ts = events[event_id]
        if round_key in days:
            by_day.setdefault(days[round_key], set()).add(event_id)
        if wide:
            for day in _days_around(ts.astimezone(UTC).date()):
                by_day.setdefault(day, set()).add(event_id)
    if not by_day:
        return []
    branches = sorted((day, list(day_ids)) for day, day_ids in by_day.items())
    select = "SELECT event_id::text, type, ts, data, round_id, day FROM observe_event"
    found: list[tuple[str, Any]] = []
    # Prepared, one text per number of days (a batch's held rounds are mostly of one or two):
    # planned at every batch, pruning the days at plan time cost 0.96 ms of the server's time
    # with the month's 38 days, the generic plan pruning them as it starts 0.3 ms in all.
    rows = prepared(
        " UNION ALL ".join(
            f"{select} WHERE day = %s::date AND event_id = ANY(string_to_array(%s, ',')::uuid[])"
            for _ in branches
        ),
        # The ids as one text each (psycopg dumps a list item by item, in Python).
        [value for day, day_ids in branches for value in (day, ",".join(day_ids))],
    )
    if not rows:
        return found
    with _bound_cursor() as cursor:
        # The rounds of the few found (a repeat is rare): their keys, for the whole JSON.
        cursor.execute(
            "SELECT id, agent, turn_id, iteration, day FROM observe_round"
            " WHERE day = ANY(%s::date[]) AND id = ANY(%s::bigint[])",
            [sorted({row[5] for row in rows}), sorted({row[4] for row in rows})],
        )
        keys = {
            (pk, day): (agent, turn_id, iteration)
            for pk, agent, turn_id, iteration, day in cursor.fetchall()
        }
    for stored_id, event_type, ts, data, round_id, day in rows:
        key = keys.get((round_id, day))
        if key is not None:
            value = unpack(data)
            found.append((stored_id, event_whole(value, stored_id, event_type, ts, key)))
    return found


def _days_around(moment: date) -> tuple[date, ...]:
    """A day and the days before and after it (those the calendar has)."""
    days = [moment]
    for step in (-1, 1):
        with contextlib.suppress(OverflowError):  # the calendar's first or last day
            days.append(moment + timedelta(days=step))
    return tuple(days)


@contextlib.contextmanager
def _bound_cursor() -> Iterator[Any]:
    """A cursor of Django's connection (its error classes, its query log) that sends
    parameters apart from the SQL: Django's own writes them into it as literals (a thousand
    ids made a long statement to parse, and psycopg never prepares such a statement)."""
    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    # Django's wrappers take any DB-API cursor (their annotation names their own).
    wrapped = (
        connection.make_debug_cursor(raw)  # type: ignore[arg-type]
        if connection.queries_logged
        else connection.make_cursor(raw)  # type: ignore[arg-type]
    )
    with wrapped as cursor:
        yield cursor


#: Where a batch's round is looked for, as a range of days (inclusive): with a last day, there
#: first, then every day when it is not there; without one, from the first day on and among the
#: rounds stored without their ``round.started`` in every day (:func:`held_rounds`).
Days = tuple[date, date | None]


def _rounds_by_key(
    columns: str, keys: Sequence[RoundKey], days: Mapping[RoundKey, Days]
) -> dict[RoundKey, tuple[Any, ...]]:
    """The stored rounds among ``keys`` (partitioned layout), each as its ``columns`` (SQL, after
    the key's three), by agents and turns as arrays, so each statement's text and plan are the
    same whatever the batch (:func:`prepared`): one statement for the keys of ``days`` as they
    name (one range per kind: the batch's earliest first and latest last day) and the others in
    every day; then the keys of a range with a last day not found there, in every day."""
    if not keys:
        return {}
    wanted = set(keys)
    going = [key for key in keys if key in days and days[key][1] is not None]
    opened = [key for key in keys if key in days and days[key][1] is None]
    others = [key for key in keys if key not in days]
    select = (
        f"SELECT agent, turn_id, iteration, {columns} FROM observe_round"
        " WHERE agent = ANY(%s::text[]) AND turn_id = ANY(%s::text[])"
    )
    found: dict[RoundKey, tuple[Any, ...]] = {}

    def read(branches: list[tuple[str, list[Any]]]) -> None:
        sql = " UNION ALL ".join(f"{select}{condition}" for condition, _ in branches)
        params = [value for _, values in branches for value in values]
        for agent, turn_id, iteration, *rest in prepared(sql, params):
            if (key := (agent, turn_id, iteration)) in wanted:
                found[key] = tuple(rest)

    branches: list[tuple[str, list[Any]]] = []
    if going:
        last = max(days[key][1] or date.max for key in going)
        first = min(days[key][0] for key in going)
        branches.append((" AND day BETWEEN %s AND %s", [*_agents_turns(going), first, last]))
    if opened:
        first = min(days[key][0] for key in opened)
        branches.append((" AND day >= %s", [*_agents_turns(opened), first]))
        # The round_before_start index (migration 0016): rows of any day, a few.
        branches.append((" AND before_start IS NOT FALSE", _agents_turns(opened)))
    if others:
        branches.append(("", _agents_turns(others)))
    read(branches)
    missing = [key for key in going if key not in found]
    if missing:
        read([("", _agents_turns(missing))])
    return found


def _agents_turns(keys: Sequence[RoundKey]) -> list[list[str]]:
    return [sorted({key[0] for key in keys}), sorted({key[1] for key in keys})]


def prepared(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Rows of a per-batch lookup over every day's partition, as a prepared statement of this
    connection with one generic plan (the settings' ``plan_cache_mode``, which only prepared
    statements follow; ``prepare_threshold`` lets psycopg prepare what asks): planning such a
    query took longer than running it, on every batch (1.2–1.8 ms with 38 days). The SQL holds
    arrays (``= ANY(%s)``), so its text and plan are the same whatever the batch."""
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        if connection.queries_logged:  # in Django's query log like every other statement
            # Django's wrapper takes any DB-API cursor (its annotation names its own).
            logged = connection.make_debug_cursor(cursor)  # type: ignore[arg-type]
            with logged.debug_sql(sql, params):
                cursor.execute(sql, params, prepare=True)
        else:
            cursor.execute(sql, params, prepare=True)
        return cursor.fetchall()


def _db_date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value))


#: The Round columns an ingest writes (besides the key), from the merged assembly.
ROUND_COLUMNS = (
    "started_at",
    "finished_at",
    "generation_finished_at",
    "outcome",
    "policy_hash",
    "max_actions",
    *COUNT_KEYS,
    "agent_in_policy",
    "before_start",
    "assembly",
    "updated_at",
)
#: The columns a write sets: :data:`ROUND_COLUMNS`, then the version the batch gave the round.
_SET_COLUMNS = (*ROUND_COLUMNS, "version")


def round_values(
    summary: AssemblySummary, state: Assembly, in_policy: bool, now: datetime, day: date
) -> dict[str, Any]:
    """The columns of a round row of partition ``day``, as :data:`ROUND_COLUMNS` names them."""
    counts = summary.counts
    return {
        "started_at": summary.started_at,
        "finished_at": summary.finished_at,
        "generation_finished_at": summary.generation_finished_at,
        "outcome": summary.outcome,
        "policy_hash": summary.policy_hash,
        "max_actions": summary.max_actions,
        **{key: counts[key] for key in COUNT_KEYS},
        "agent_in_policy": in_policy,
        # No round.started yet, or the row lies in a day before it (its first events came
        # first, stamped earlier): a batch that starts the round asks for it in every day.
        "before_start": state["start"] is None or day < summary.started_at.astimezone(UTC).date(),
        "assembly": state,
        "updated_at": now,
    }


@dataclass
class HeldRound:
    pk: int
    day: date
    assembly: Assembly
    in_policy: bool
    facts: RoundFacts
    drift: bool | None
    #: The row's ``(version, updated_at)`` when read: every write changes one of them (ingest
    #: the version, the drift check ``updated_at``), so the same pair means the same row.
    stamp: tuple[int, datetime]


def _db_datetime(value: Any) -> datetime:
    """A datetime column read with plain SQL, as the ORM returns it (aware, UTC)."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def held_rounds(
    keys: Sequence[RoundKey], days: Mapping[RoundKey, Days] | None = None
) -> dict[RoundKey, HeldRound]:
    """The rounds already stored, with their assembly and facts (one plain query: a queryset
    costs more to build than the query takes to run on every POST). ``days``: on the
    partitioned layout, where a round of ``keys`` is looked for first (ingest's
    ``round_days``), then in every day when it is not there; a key without a range is looked
    for in every day. Other layouts ask one table."""
    quote = connection.ops.quote_name
    names = (
        "id",
        "assembly",
        "agent_in_policy",
        "started_at",
        "drift",
        "day",
        "version",
        "updated_at",
        *KIND_COUNTERS,
    )
    columns = ", ".join(quote(name) for name in names)
    if partitioned():
        found = _rounds_by_key(columns, keys, days or {})
    else:
        wanted = set(keys)
        agents = sorted({key[0] for key in keys})
        turns = sorted({key[1] for key in keys})
        found = {}
        with connection.cursor() as cursor:
            for first in range(0, len(turns), _IDS_PER_QUERY):
                chunk = turns[first : first + _IDS_PER_QUERY]
                cursor.execute(
                    f"SELECT {quote('agent')}, {quote('turn_id')}, {quote('iteration')},"
                    f" {columns} FROM {quote(Round._meta.db_table)}"
                    f" WHERE {quote('agent')} IN ({', '.join(['%s'] * len(agents))})"
                    f" AND {quote('turn_id')} IN ({', '.join(['%s'] * len(chunk))})",
                    [*agents, *chunk],
                )
                for agent, turn_id, iteration, *rest in cursor.fetchall():
                    if (key := (agent, turn_id, iteration)) in wanted:
                        found[key] = tuple(rest)
    assembly_field = Round._meta.get_field("assembly")
    held: dict[RoundKey, HeldRound] = {}
    for key, row in found.items():
        pk, assembly, in_policy, started, drift, day, version, updated_at, *counts = row
        state = assembly_field.from_db_value(assembly, None, connection)
        tools = state.get("tools", []) if state else []
        held[key] = HeldRound(
            pk,
            _db_date(day),
            state,
            bool(in_policy),
            RoundFacts.of(key[0], _db_datetime(started), counts, tools, drift is True),
            None if drift is None else bool(drift),
            (int(version), _db_datetime(updated_at)),
        )
    return held


def stored_version() -> int:
    """The last version handed out by a committed batch (0: none yet). Read before a batch's
    rounds, it dates that read for :func:`rounds_changed`. SQLite: 0, unread (nothing changes
    between its read and its lock)."""
    if connection.vendor == "sqlite":
        return 0
    table = connection.ops.quote_name(StreamCounter._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT value FROM {table} WHERE id = %s", [StreamCounter.SINGLETON_ID])
        row = cursor.fetchone()
    return int(row[0]) if row is not None else 0


#: The upper bound of :func:`rounds_changed`'s version range (a version is a ``bigint``).
_LAST_VERSION = 2**63 - 1


def rounds_changed(
    held: Mapping[RoundKey, HeldRound], keys: Sequence[RoundKey], since: int
) -> bool:
    """Whether another batch has stored or changed one of the rounds ``keys`` since ``held``
    was read, ``since`` (:func:`stored_version`) read before it (ingest merges before it takes
    the counter's lock, then asks this under it). Every round a batch writes takes one of its
    versions, all past ``since`` if the batch committed after ``held`` was read: the rounds of
    versions past ``since`` (a few batches' worth, at the end of each day's version index) and
    the held rounds by primary key (a drift verdict changes ``updated_at`` only; a pruned round
    is gone) — not the batch's keys looked up in every day's partition again (4.3 ms a batch
    of 1000 at 10M events). SQLite: never (its transaction holds the database's write lock from
    its first statement: nothing changes between the read and the lock)."""
    if connection.vendor == "sqlite" or not keys:
        return False
    stamps = {key: held[key].stamp for key in keys if key in held}
    # Two bounds: a generic plan reckons ``version > $1`` alone a third of each partition (a
    # bitmap heap scan), a range half a percent (an index scan).
    rows = prepared(
        "SELECT agent, turn_id, iteration, version, updated_at FROM observe_round"
        " WHERE version > %s AND version <= %s"
        " UNION ALL SELECT agent, turn_id, iteration, version, updated_at FROM observe_round"
        " WHERE id = ANY(%s::bigint[]) AND day BETWEEN %s AND %s",
        [
            since,
            _LAST_VERSION,
            sorted({held[key].pk for key in stamps}),
            # A range of days, not an array: a generic plan prunes no partition by
            # ``day = ANY($n)`` (every day's primary key was asked for every held id).
            min((held[key].day for key in stamps), default=date.max),
            max((held[key].day for key in stamps), default=date.max),
        ],
    )
    wanted = set(keys)
    now = {
        key: (int(version), _db_datetime(updated_at))
        for agent, turn_id, iteration, version, updated_at in rows
        if (key := (agent, turn_id, iteration)) in wanted
    }
    return now != stamps


class _JsonText(str):
    """JSON text already encoded (by the fast checks), with the value it encodes."""

    value: Any

    def __new__(cls, text: str, value: Any) -> _JsonText:
        made = super().__new__(cls, text)
        made.value = value
        return made


#: The last datetime converted and its text: a batch's rows share one ``received_at``/``now``.
_last_datetime: tuple[datetime | None, str | None] = (None, None)


def _sqlite_datetime(value: datetime | None) -> str | None:
    # What Django's SQLite backend stores for an aware datetime (UTC, naive, str()).
    global _last_datetime
    if value is None:
        return None
    last = _last_datetime  # one tuple, replaced whole: threads never see half of it
    if value is last[0]:
        return last[1]
    text = str(value.astimezone(UTC).replace(tzinfo=None))
    _last_datetime = (value, text)
    return text


def _sqlite_ts(text: str) -> str:
    """What Django's SQLite backend stores for an event's time, from its normalized text
    (``YYYY-MM-DDTHH:MM:SS.mmmZ``, UTC): ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (``str()`` of the naive
    UTC datetime, which leaves out a zero fraction)."""
    millis = text[20:23]
    if millis == "000":
        return f"{text[:10]} {text[11:19]}"
    return f"{text[:10]} {text[11:19]}.{millis}000"


def _sqlite_json(value: Any) -> str:
    if isinstance(value, _JsonText):
        return value
    # Rounds' assemblies and drift notes: built from checked events (finite numbers, integers
    # within 64 bits), so orjson writes what the standard encoder would, a fifth of the time.
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except TypeError:
        return json.dumps(value)


class _Writer:
    """Plain INSERT/UPDATE statements run with ``executemany``: one statement per table and
    batch, values prepared by each field (so SQLite and PostgreSQL get what they expect). On
    SQLite the few conversions are done directly: the generic path costs more than the insert."""

    def __init__(self, model: type[models.Model], names: Sequence[str]) -> None:
        self.fields = [model._meta.get_field(name) for name in names]
        self.table = connection.ops.quote_name(model._meta.db_table)
        self.columns = [connection.ops.quote_name(str(f.column)) for f in self.fields]  # type: ignore[union-attr]
        self.converters: list[Callable[[Any], Any]] = [self._converter(f) for f in self.fields]
        #: Whether rows may be given as the values SQLite stores (see ``_store``).
        self.direct = connection.vendor == "sqlite" and settings.USE_TZ

    @staticmethod
    def _converter(field: Any) -> Callable[[Any], Any]:
        if connection.vendor == "sqlite" and settings.USE_TZ:
            if isinstance(field, models.DateTimeField):
                return _sqlite_datetime
            if isinstance(field, models.JSONField) and field.encoder is None:
                return _sqlite_json
            if isinstance(field, models.CharField | models.IntegerField | models.BooleanField):
                return lambda value: value
            if isinstance(field, models.ForeignKey):
                return lambda value: value

        def generic(value: Any) -> Any:
            if isinstance(value, _JsonText):
                value = value.value
            return field.get_db_prep_save(value, connection)

        return generic

    def prepare(self, values: Sequence[Any]) -> list[Any]:
        return [convert(value) for convert, value in zip(self.converters, values, strict=True)]

    def insert(self, rows: list[list[Any]]) -> None:
        if rows:
            marks = ", ".join(["%s"] * len(self.columns))
            sql = f"INSERT INTO {self.table} ({', '.join(self.columns)}) VALUES ({marks})"
            with connection.cursor() as cursor:
                cursor.executemany(sql, rows)

    def update(self, rows: list[list[Any]], *, by_day: bool = False) -> None:
        """``rows`` end with the primary key (and with ``by_day`` the row's partition day); the
        other values set the columns in order."""
        if rows:
            quote = connection.ops.quote_name
            sets = ", ".join(f"{column} = %s" for column in self.columns)
            sql = f"UPDATE {self.table} SET {sets} WHERE {quote('id')} = %s"
            if by_day:
                sql += f" AND {quote('day')} = %s"
            with connection.cursor() as cursor:
                cursor.executemany(sql, rows)


_writers: dict[tuple[str, str, type[models.Model], tuple[str, ...]], _Writer] = {}


def _writer(model: type[models.Model], names: Sequence[str]) -> _Writer:
    """The writer of these columns, made once per database (per vendor: the conversions
    differ)."""
    key = (connection.alias, connection.vendor, model, tuple(names))
    writer = _writers.get(key)
    if writer is None:
        writer = _writers[key] = _Writer(model, names)
    return writer


def _data(event: Event, texts: Mapping[str, str | None]) -> Any:
    text = texts.get(event.event_id)
    return _JsonText(text, event.data) if text is not None else event.data


@dataclass
class RoundWrite:
    """One round of a batch, merged: its key, its row (``pk`` None: a new round), the columns
    :data:`ROUND_COLUMNS` names, the batch's events of it and the tool ids it newly holds."""

    key: RoundKey
    pk: int | None
    values: dict[str, Any]
    events: list[Event]
    new_tools: list[str]
    #: The round's partition day (:attr:`observe.models.Round.day`): its first ``started_at``'s.
    day: date


def batch_write(
    rounds: Sequence[RoundWrite],
    texts: Mapping[str, str | None],
    versions: Sequence[int],
    meanwhile: Callable[[], None] = lambda: None,
) -> dict[RoundKey, int]:
    """Write a merged batch: every round row (one UPDATE and one INSERT statement), then its
    events and new tool rows. ``texts``: each event's JSON text when the checks encoded it;
    ``versions``: each round's, in order (taken under the counter's lock, after the merge).
    ``meanwhile``: the batch's other writes, run once its rounds are sent (on PostgreSQL while
    the server writes them: a read in it waits for them). Returns each round's primary key."""
    if partitioned():
        return _write_partitioned(rounds, versions, meanwhile)
    round_writer = _writer(Round, _SET_COLUMNS)
    new_round_writer = _writer(Round, ("agent", "turn_id", "iteration", "day", *_SET_COLUMNS))
    written = list(zip(rounds, versions, strict=True))
    round_writer.update(
        [
            [*round_writer.prepare([*r.values.values(), version]), r.pk]
            for r, version in written
            if r.pk is not None
        ]
    )
    new_round_writer.insert(
        [
            new_round_writer.prepare([*r.key, r.day, *r.values.values(), version])
            for r, version in written
            if r.pk is None
        ]
    )
    pks = {r.key: r.pk for r in rounds if r.pk is not None}
    if len(pks) < len(rounds):
        # Each round of the batch took one of its versions: they find the new rows' ids.
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {quote('id')}, {quote('agent')}, {quote('turn_id')},"
                f" {quote('iteration')} FROM {quote(Round._meta.db_table)}"
                f" WHERE {quote('version')} BETWEEN %s AND %s",
                [versions[0], versions[-1]],
            )
            for pk, agent, turn_id, iteration in cursor.fetchall():
                pks[(agent, turn_id, iteration)] = pk
    event_writer = _writer(StoredEvent, ("event_id", "round", "type", "ts", "data", "day"))
    if event_writer.direct:
        # SQLite: the values Django would write, made without a call per value (the event's
        # normalized ts text is its stored time; the JSON text is the checks' encoding).
        dumps = json.dumps
        event_rows = [
            [
                e.event_id,
                pks[r.key],
                e.type,
                _sqlite_ts(e.data["ts"]),
                texts[e.event_id] or dumps(e.data, ensure_ascii=False, separators=(",", ":")),
                day,
            ]
            for r in rounds
            for day in (r.day.isoformat(),)
            for e in r.events
        ]
    else:
        event_rows = [
            event_writer.prepare((e.event_id, pks[r.key], e.type, e.ts, _data(e, texts), r.day))
            for r in rounds
            for e in r.events
        ]
    event_writer.insert(event_rows)
    tool_writer = _writer(RoundTool, ("round", "tool_id", "day"))
    tool_writer.insert(
        [
            tool_writer.prepare((pks[r.key], tool_id, r.day))
            for r in rounds
            for tool_id in r.new_tools
        ]
    )
    meanwhile()
    return pks


#: The partitioned layout's write of new rounds, their events and tool rows: one statement. The
#: rounds' columns are one JSON text parameter read with the round table's row type, but their
#: packed assemblies an array beside it, keyed by version; the events and tool rows are arrays,
#: one per column. Arrays go in PostgreSQL's binary form (psycopg's C dumpers): 1000 events as
#: JSON text, their packed data in hex, took 7.3 ms to send and parse, as arrays 2.6 ms. A row
#: of an event or a tool names its round by primary key or, a round new in this batch, by the
#: version the batch gave it (unique in the batch): the new rounds' ids come back from their
#: INSERT.
_WRITE_SQL = """
WITH new_round AS (
    INSERT INTO observe_round ({round_columns})
    SELECT {round_values}
    FROM json_populate_recordset(NULL::observe_round, %t::json) AS r
    JOIN unnest(%b::bigint[], %b::bytea[]) AS a(version, assembly) ON a.version = r.version
    RETURNING id, agent, turn_id, iteration, version
), new_event AS (
    INSERT INTO observe_event (event_id, round_id, type, ts, data, day)
    SELECT x.event_id, COALESCE(x.round_id, n.id), x.type, x.ts, x.data, x.day
    FROM unnest(
        %b::uuid[], %b::bigint[], %b::bigint[], %b::text[], %b::timestamptz[], %b::bytea[],
        %b::date[]
    ) AS x(event_id, round_id, version, type, ts, data, day)
    LEFT JOIN new_round AS n ON n.version = x.version
), new_tool AS (
    INSERT INTO observe_roundtool (round_id, tool_id, day)
    SELECT COALESCE(x.round_id, n.id), x.tool_id, x.day
    FROM unnest(%b::bigint[], %b::bigint[], %b::text[], %b::date[])
        AS x(round_id, version, tool_id, day)
    LEFT JOIN new_round AS n ON n.version = x.version
)
SELECT id, agent, turn_id, iteration FROM new_round
"""

#: Events per part of a batch's write on PostgreSQL (:func:`_write_partitioned`).
WRITE_PART_EVENTS = 250


@contextlib.contextmanager
def pipeline() -> Iterator[None]:
    """PostgreSQL: the statements run inside go out without waiting for each other's results
    (psycopg's pipeline mode), so the server works while this process prepares the next; a
    read waits for every statement sent before it, and an error is raised (as Django's) at
    the next read or when the block ends. Other databases: nothing changes."""
    if connection.vendor != "postgresql":
        yield
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield


def _write_partitioned(
    rounds: Sequence[RoundWrite], versions: Sequence[int], meanwhile: Callable[[], None]
) -> dict[RoundKey, int]:
    """:func:`batch_write` on the partitioned layout, pipelined (:func:`pipeline`): the stored
    rounds' UPDATE (each naming its day: one partition's primary key is probed, not every
    day's), then the new rounds, events and tool rows in parts of about
    :data:`WRITE_PART_EVENTS` events, one statement each (:data:`_WRITE_SQL`), then
    ``meanwhile``. The server inserts a part while this process packs the next (a batch of
    1000 events: 46 → 40 ms), and the batch's other writes follow without a round trip each."""
    round_writer = _writer(Round, _SET_COLUMNS)
    pks = {r.key: r.pk for r in rounds if r.pk is not None}
    columns = ("agent", "turn_id", "iteration", "day", *_SET_COLUMNS)
    sql = _WRITE_SQL.format(
        round_columns=", ".join(columns),
        round_values=", ".join("a.assembly" if c == "assembly" else f"r.{c}" for c in columns),
    )
    written = list(zip(rounds, versions, strict=True))
    with contextlib.ExitStack() as cursors, pipeline():
        round_writer.update(
            [
                [*round_writer.prepare([*r.values.values(), version]), r.pk, r.day]
                for r, version in written
                if r.pk is not None
            ],
            by_day=True,
        )
        sent = []
        for part in _parts(written):
            cursor = cursors.enter_context(_bound_cursor())
            cursor.execute(sql, _write_params(part))
            sent.append(cursor)
        meanwhile()
        for cursor in sent:
            for pk, agent, turn_id, iteration in cursor.fetchall():
                pks[(agent, turn_id, iteration)] = pk
    return pks


def _parts(rounds: list[tuple[RoundWrite, int]]) -> Iterator[list[tuple[RoundWrite, int]]]:
    """The rounds in parts of at least :data:`WRITE_PART_EVENTS` events (the last may hold
    fewer), each round whole."""
    part: list[tuple[RoundWrite, int]] = []
    count = 0
    for item in rounds:
        part.append(item)
        count += len(item[0].events)
        if count >= WRITE_PART_EVENTS:
            yield part
            part, count = [], 0
    if part:
        yield part


def _write_params(part: Sequence[tuple[RoundWrite, int]]) -> list[Any]:
    """The parameters of :data:`_WRITE_SQL` for a part of a batch: the new rounds' columns but
    their assemblies, their versions and packed assemblies, then one list per column of the
    events and of the tool rows (a row names its round by primary key or, a round new in this
    batch, by its version: the other is NULL)."""
    new_rounds: list[dict[str, Any]] = []
    round_versions: list[int] = []
    assemblies: list[bytes] = []
    events: tuple[list[Any], ...] = ([], [], [], [], [], [], [])
    tools: tuple[list[Any], ...] = ([], [], [], [])
    event_ids, event_rounds, event_versions, types, times, data, event_days = events
    tool_rounds, tool_versions, tool_ids, tool_days = tools
    for r, version in part:
        if r.pk is None:
            new_rounds.append(
                {"agent": r.key[0], "turn_id": r.key[1], "iteration": r.key[2], "day": r.day}
                | r.values
                | {"version": version, "assembly": None}
            )
            round_versions.append(version)
            assemblies.append(pack(r.values["assembly"]))
        new = None if r.pk is not None else version
        count = len(r.events)
        event_rounds.extend([r.pk] * count)
        event_versions.extend([new] * count)
        event_days.extend([r.day] * count)
        for e in r.events:
            event_ids.append(e.event_id)
            types.append(e.type)
            times.append(e.ts)
            data.append(pack(event_stored_json(e.data)))
        count = len(r.new_tools)
        tool_rounds.extend([r.pk] * count)
        tool_versions.extend([new] * count)
        tool_ids.extend(r.new_tools)
        tool_days.extend([r.day] * count)
    return [_json_text(new_rounds), round_versions, assemblies, *events, *tools]


def _json_text(value: Any) -> str:
    """JSON text of checked event data or an assembly (orjson; the standard encoder for what it
    refuses, an integer past 64 bits)."""
    if isinstance(value, _JsonText):
        return str(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False, default=_iso)


def _iso(value: Any) -> str:
    """A batch's times and days in its JSON text (as orjson writes them)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")
