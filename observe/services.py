"""Ingest: validate → store (idempotent by event_id) → merge into rounds → tell the live view.

The runtime may send an event more than once and in any order: an ``event_id`` is stored once,
and each batch is merged into its rounds' assemblies, which never depend on arrival order.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from core.json_limits import MAX_DEPTH, MAX_STORED_INT
from core.text import dot_segment, unencodable_path
from observe.domain.events import Event, EventError, parse_event, same_content, stored_event
from observe.domain.kinds import COUNT_KEYS, ROUND_KINDS
from observe.domain.rounds import (
    Assembly,
    AssemblySummary,
    assembly_merge,
    assembly_new,
    assembly_summary,
)
from observe.drift import Stored, check_drift_after_ingest
from observe.live.counters import Facts, round_facts
from observe.models import Event as StoredEvent
from observe.models import Round, RoundTool, StreamCounter
from web.api_io import StoreBusy

logger = logging.getLogger(__name__)

LIVE_GROUP = "live-rounds"
REUSED_ID = "event_id reused with different content"
#: Rounds deleted per transaction by ``rounds_prune``: short write locks while the server runs.
PRUNE_BATCH = 500


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    change: Change | None = None

    @property
    def version(self) -> int | None:
        return self.change.version if self.change is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "rejected": self.rejected}


def _next_versions(count: int) -> list[int]:
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
        return _next_versions(count)
    last = int(row[0])
    return list(range(last - count + 1, last + 1))


#: What triage keeps of each new event: its index in the batch, the event, and its JSON text
#: when the fast checks already produced it (``None``: the field encodes it).
Fresh = dict[str, tuple[int, Event, str | None]]


#: Valid events of a batch: index in the batch, the event, its JSON text (see :data:`Fresh`).
Parsed = list[tuple[int, Event, str | None]]


def _parse_all(raw_events: Sequence[Any]) -> tuple[Parsed, list[dict[str, Any]]]:
    """Check every event (outside any transaction: this is most of a batch's work); the valid
    ones, and the invalid ones reported by index."""
    parsed: Parsed = []
    rejected: list[dict[str, Any]] = []
    latest = _latest_allowed()
    for index, raw in enumerate(raw_events):
        try:
            parsed.append((index, *_checked(raw, latest)))
        except EventError as exc:
            rejected.append({"index": index, "error": str(exc)})
    return parsed, rejected


def _triage(parsed: Parsed, result: IngestResult) -> Fresh:
    """Keep the new events, count duplicates, report a reused ``event_id`` by index.

    A repeated ``event_id`` is compared with the stored event when there is one, else with its
    first valid occurrence in the batch: the stored content is the truth once it exists.
    """
    ids = list({event.event_id for _, event, _ in parsed})
    known: dict[str, Event] = {event_id: _stored(data) for event_id, data in _stored_data(ids)}
    fresh: Fresh = {}
    for index, event, text in parsed:
        reference = known.get(event.event_id)
        if reference is None:
            known[event.event_id] = event
            fresh[event.event_id] = (index, event, text)
        elif same_content(reference, event):
            result.duplicates += 1
        else:
            result.rejected.append({"index": index, "error": REUSED_ID})
    result.rejected.sort(key=lambda item: item["index"])
    return fresh


#: Ids per ``IN (…)`` list: well under every database's limit on statement parameters.
_IDS_PER_QUERY = 500


def _stored_data(ids: Sequence[str]) -> list[tuple[str, Any]]:
    """``(event_id, data)`` of the stored events among ``ids``: plain SQL (a queryset costs more
    to build than this query takes to run on every POST)."""
    if not ids:
        return []
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
                (stored_id, data_field.from_db_value(value, None, connection))  # type: ignore[arg-type]
                for stored_id, value in cursor.fetchall()
            )
    return found


def _stored(data: Any) -> Event:
    """A stored event, normalized as today's events are (as stored, if a later rule refuses it)."""
    try:
        return parse_event(data)
    except EventError:
        return stored_event(data)


def _parse(raw: Any) -> Event:
    """``parse_event`` plus the limits of storage (any JSON database, SQLite or PostgreSQL) and
    of the pages that show the event: this is the one place an incoming event is checked."""
    return _checked(raw)[0]


def _plain_json(data: Any) -> str | None:
    """The event's JSON text when one cheap look shows it breaks no storage limit (no lone
    surrogate, NUL, NaN, deep nesting or huge number), else ``None``: then each value is
    checked one by one, which names the field. Each event is encoded once, for both.

    orjson encodes (a tenth of the standard encoder's time) and refuses lone surrogates, integers
    past 53 bits (the rare larger ones are checked one by one), non-text keys and deep nesting
    itself; it writes NaN and infinities as ``null``, so text holding a ``null`` is only taken
    when no such number is in the event."""
    try:
        encoded = orjson.dumps(data, option=orjson.OPT_STRICT_INTEGER)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
    if b"null" in encoded and _non_finite(data):
        return None
    text = encoded.decode("utf-8")
    if "\\u0000" in text or text.count("{") + text.count("[") >= MAX_DEPTH:
        return None
    return text


def _non_finite(data: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in ``data`` (walked with a stack)."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return True
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return False


def _encodable(raw: Any) -> None:
    where = unencodable_path(raw)
    if where is not None:
        # A lone UTF-16 surrogate ("\ud800") decodes from JSON but no page or database can
        # write it.
        raise EventError(f"{where} holds text that cannot be encoded as UTF-8 (a lone surrogate)")


def _latest_allowed() -> datetime:
    """The latest ``ts`` accepted now (the server's clock plus the allowed skew)."""
    skew = timedelta(seconds=settings.TRAITDECK_CLOCK_SKEW_S)
    try:
        return datetime.now(UTC) + skew
    except OverflowError:  # a window past year 9999: no limit
        return datetime.max.replace(tzinfo=UTC)


def _checked(raw: Any, latest: datetime | None = None) -> tuple[Event, str | None]:
    try:
        event = parse_event(raw)
    except EventError:
        _encodable(raw)  # a lone surrogate is the error to report, wherever it is
        raise
    text = _plain_json(event.data)
    if text is None:
        _encodable(raw)
        problem = _unstorable(event.data)
        if problem is not None:
            raise EventError(problem)
    if "/" in event.agent:
        # A round's address (page and API) is <agent>/<turn_id>/<iteration> and only the turn_id
        # may contain "/": a round of such an agent could be stored but never opened.
        raise EventError("agent must not contain '/'")
    if dot_segment(event.turn_id):
        # The round's link would resolve elsewhere in the site ("../../policy").
        raise EventError("turn_id must not have a '.' or '..' path segment")
    if latest is None:
        latest = _latest_allowed()
    if event.ts > latest:
        # A round from the future would stay at the top of the history and never be pruned.
        raise EventError(
            f"ts {event.data['ts']} is in the future (more than"
            f" {settings.TRAITDECK_CLOCK_SKEW_S:.0f} s"
            " ahead of the server's clock)"
        )
    return event, text


def _unstorable(data: Any) -> str | None:
    """Why a decoded JSON value cannot be stored as-is, or ``None``.

    Unknown fields and ``params`` are kept exactly as sent, so the checks ``parse_event`` makes on
    the protocol fields are repeated here for everything: PostgreSQL refuses a NUL character in
    JSON text, JSON has no NaN or Infinity (SQLite's JSON check refuses them), integers must fit
    the 64 bits databases and JavaScript clients read, and nesting is bounded so that encoding
    the value again can never exhaust the stack.
    """
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        path, value, depth = stack.pop()
        name = path or "the event"
        if isinstance(value, str):
            if "\x00" in value:
                return f"{name} must not contain a NUL character"
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if not -MAX_STORED_INT <= value <= MAX_STORED_INT:
                return f"{name} is out of range: integers must fit in 64 bits"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"{name} must be a finite number"
        elif isinstance(value, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                return f"{name} nests deeper than {MAX_DEPTH} levels"
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and "\x00" in key:
                    return f"a field name in {name} contains a NUL character"
                child = f"{path}[{key}]" if isinstance(key, int) else _join(path, str(key))
                stack.append((child, item, depth + 1))
        else:  # only reachable from Python callers, never from decoded JSON
            return f"{name} is not a JSON value"
    return None


def _join(path: str, key: str) -> str:
    shown = key if len(key) <= 40 else key[:37] + "..."
    return f"{path}.{shown}" if path else shown


#: The Round columns an ingest writes (besides the key), from the merged assembly.
_ROUND_COLUMNS = (
    "started_at",
    "finished_at",
    "generation_finished_at",
    "outcome",
    "policy_hash",
    "max_actions",
    "actions",
    "rejections",
    "early_starts",
    "dedups",
    "timeouts",
    "agent_in_policy",
    "assembly",
    "version",
    "updated_at",
)

RoundKey = tuple[str, str, int]


def _round_values(
    summary: AssemblySummary, state: Assembly, in_policy: bool, version: int, now: datetime
) -> dict[str, Any]:
    """The columns of a round row, as :data:`_ROUND_COLUMNS` names them."""
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
        "assembly": state,
        "version": version,
        "updated_at": now,
    }


_KIND_COLUMNS = tuple(kind.counter for kind in ROUND_KINDS)


@dataclass
class _Held:
    pk: int
    assembly: Assembly
    in_policy: bool
    facts: Facts
    drift: bool | None


def _db_datetime(value: Any) -> datetime:
    """A datetime column read with plain SQL, as the ORM returns it (aware, UTC)."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _held_rounds(keys: Sequence[RoundKey]) -> dict[RoundKey, _Held]:
    """The rounds already stored, with their assembly and facts (one plain query: a queryset
    costs more to build than the query takes to run on every POST)."""
    wanted = set(keys)
    agents = sorted({key[0] for key in keys})
    turns = sorted({key[1] for key in keys})
    quote = connection.ops.quote_name
    columns = (
        "id",
        "agent",
        "turn_id",
        "iteration",
        "assembly",
        "agent_in_policy",
        "started_at",
        "drift",
    )
    assembly_field = Round._meta.get_field("assembly")
    held: dict[RoundKey, _Held] = {}
    with connection.cursor() as cursor:
        for first in range(0, len(turns), _IDS_PER_QUERY):
            chunk = turns[first : first + _IDS_PER_QUERY]
            cursor.execute(
                f"SELECT {', '.join(quote(c) for c in (*columns, *_KIND_COLUMNS))}"
                f" FROM {quote(Round._meta.db_table)}"
                f" WHERE {quote('agent')} IN ({', '.join(['%s'] * len(agents))})"
                f" AND {quote('turn_id')} IN ({', '.join(['%s'] * len(chunk))})",
                [*agents, *chunk],
            )
            for (
                pk,
                agent,
                turn_id,
                iteration,
                assembly,
                in_policy,
                started,
                drift,
                *counts,
            ) in cursor.fetchall():
                key = (agent, turn_id, iteration)
                if key not in wanted:
                    continue
                state = (
                    orjson.loads(assembly)
                    if isinstance(assembly, str)
                    else assembly_field.from_db_value(assembly, None, connection)  # type: ignore[arg-type]
                )
                tools = state.get("tools", []) if state else []
                held[key] = _Held(
                    pk,
                    state,
                    bool(in_policy),
                    round_facts(agent, _db_datetime(started), counts, tools, drift is True),
                    None if drift is None else bool(drift),
                )
    return held


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

    def update(self, rows: list[list[Any]]) -> None:
        """``rows`` end with the primary key; the other values set the columns in order."""
        if rows:
            sets = ", ".join(f"{column} = %s" for column in self.columns)
            sql = f"UPDATE {self.table} SET {sets} WHERE {connection.ops.quote_name('id')} = %s"
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


@dataclass
class Change:
    """What a committed batch changed, for the live view: versions ``first``..``version`` (one
    per round), and per round ``[pk, facts before (None: new), facts after]``."""

    first: int
    version: int
    rounds: list[list[Any]]
    #: Each touched round as stored, by primary key (for the drift check; not sent).
    stored: dict[int, Stored] = field(default_factory=dict)

    def message(self) -> dict[str, Any]:
        return {
            "type": "rounds.changed",
            "first": self.first,
            "version": self.version,
            "rounds": self.rounds,
            # Tells one batch from another even where versions start again (a fresh database).
            "stamp": uuid.uuid4().hex,
        }


def _data(event: Event, texts: Mapping[str, str | None]) -> Any:
    text = texts.get(event.event_id)
    return _JsonText(text, event.data) if text is not None else event.data


def _store(fresh: Fresh, known_agents: frozenset[str] | None) -> Change:
    """Store the new events and merge them into the assembly of each round they touch.

    The work is the batch's, whatever the rounds already hold: each touched round's row is read
    once (with its assembly) and written once; the events, the new rounds and the new tool ids
    are each one statement. Merging is order-independent, so arrival order never matters.
    """
    by_round: dict[RoundKey, list[Event]] = defaultdict(list)
    texts: dict[str, str | None] = {}
    for _, event, text in fresh.values():
        by_round[event.round_key].append(event)
        texts[event.event_id] = text
    keys = list(by_round)
    # The counter row is locked first: batches then merge into assemblies one after another.
    versions = _next_versions(len(keys))
    held = _held_rounds(keys)
    now = timezone.now()
    created: list[list[Any]] = []
    updates: list[list[Any]] = []
    new_tools: dict[RoundKey, list[str]] = {}
    round_writer = _writer(Round, _ROUND_COLUMNS)
    new_round_writer = _writer(Round, ("agent", "turn_id", "iteration", *_ROUND_COLUMNS))
    facts: dict[RoundKey, tuple[Facts | None, Facts]] = {}
    stored: dict[RoundKey, Stored] = {}
    for key, version in zip(keys, versions, strict=True):
        row = held.get(key)
        state = row.assembly if row is not None and row.assembly else assembly_new()
        in_policy = row.in_policy if row is not None else True
        before = set(state["tools"])
        assembly_merge(state, by_round[key])
        summary = assembly_summary(state)
        if known_agents is not None:
            in_policy = key[0] in known_agents
        values = _round_values(summary, state, in_policy, version, now)
        counts = [summary.counts[column] for column in _KIND_COLUMNS]
        facts[key] = (
            row.facts if row is not None else None,
            # The drift the row has now; the check after storing may change it.
            round_facts(
                key[0],
                summary.started_at,
                counts,
                state["tools"],
                row is not None and row.drift is True,
            ),
        )
        stored[key] = Stored(
            key[0],
            summary.policy_hash,
            summary.outcome is not None,
            row.drift if row is not None else None,
            state,
        )
        if row is None:
            created.append(new_round_writer.prepare([*key, *values.values()]))
        else:
            updates.append([*round_writer.prepare(list(values.values())), row.pk])
        added = sorted(summary.tool_ids - before)
        if added:
            new_tools[key] = added
    round_writer.update(updates)
    new_round_writer.insert(created)
    pks = {key: row.pk for key, row in held.items()}
    if created:
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
    event_writer = _writer(StoredEvent, ("event_id", "round", "type", "ts", "data", "received_at"))
    if event_writer.direct:
        # SQLite: the values Django would write, made without a call per value (the event's
        # normalized ts text is its stored time; the JSON text is the checks' encoding).
        received = _sqlite_datetime(now)
        dumps = json.dumps
        event_rows = [
            [
                e.event_id,
                pks[key],
                e.type,
                _sqlite_ts(e.data["ts"]),
                texts[e.event_id] or dumps(e.data, ensure_ascii=False, separators=(",", ":")),
                received,
            ]
            for key, events in by_round.items()
            for e in events
        ]
    else:
        event_rows = [
            event_writer.prepare((e.event_id, pks[key], e.type, e.ts, _data(e, texts), now))
            for key, events in by_round.items()
            for e in events
        ]
    event_writer.insert(event_rows)
    tool_writer = _writer(RoundTool, ("round", "tool_id"))
    tool_writer.insert(
        [
            tool_writer.prepare((pks[key], tool_id))
            for key, tools in new_tools.items()
            for tool_id in tools
        ]
    )
    return Change(
        first=versions[0],
        version=versions[-1],
        rounds=[[pks[key], old, new] for key, (old, new) in facts.items()],
        stored={pks[key]: value for key, value in stored.items()},
    )


#: One batch of this process writes at a time: the others wait here, in turn, rather than in
#: SQLite's busy handler, which sleeps up to 100 ms between tries (a writer may sleep on while the
#: lock is free). Several processes still take the database's own lock.
_WRITE_LOCK = threading.Lock()
#: How long a batch waits for its turn: the database's own lock wait (5 s), then 503.
WRITE_WAIT_S = 5.0


@contextmanager
def _write_turn() -> Iterator[None]:
    if not _WRITE_LOCK.acquire(timeout=WRITE_WAIT_S):
        raise StoreBusy(f"ingest waited {WRITE_WAIT_S:g} s for the other batches being written")
    try:
        yield
    finally:
        _WRITE_LOCK.release()


def events_ingest(
    raw_events: Sequence[Any], *, known_agents: frozenset[str] | None = None
) -> IngestResult:
    """Store a batch: valid events are kept even when others are invalid (reported by index).

    ``known_agents``: the agents of the policy in force, to mark rounds "agent not in policy".
    """
    parsed, invalid = _parse_all(raw_events)
    for attempt in (1, 2):
        result = IngestResult(rejected=list(invalid))
        try:
            with _write_turn(), transaction.atomic():
                fresh = _triage(parsed, result)
                if fresh:
                    result.change = _store(fresh, known_agents)
                result.accepted = len(fresh)
        except IntegrityError:
            # A concurrent batch stored one of these event_ids first: triage again, once.
            if attempt == 2:
                raise
            continue
        break
    if result.change is not None:
        # After storing (a failure there loses nothing), before telling the viewers (their
        # cards then show the drift chip of a round that just finished).
        checked = check_drift_after_ingest(result.change.stored)
        for entry in result.change.rounds:
            if entry[0] in checked:
                entry[2][7] = int(checked[entry[0]] is True)
        broadcast_change(result.change)
    return result


def broadcast_change(change: Change) -> None:
    """Tell the live views what this batch changed (each renders it once and fans it out)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(LIVE_GROUP, change.message())
    except Exception:  # the events are stored; viewers catch up when they notice the gap
        logger.exception("could not notify the live view of version %s", change.version)


def rounds_prune(*, older_than: datetime) -> int:
    """Delete the rounds that started before ``older_than``, with their events and tool rows.

    Returns how many rounds were deleted. Works in batches so that a large prune never holds the
    database's write lock for long while runtimes keep posting.
    """
    deleted = 0
    while True:
        with transaction.atomic():
            batch = list(
                Round.objects.filter(started_at__lt=older_than)
                .order_by("pk")
                .values_list("pk", flat=True)[:PRUNE_BATCH]
            )
            if not batch:
                return deleted
            Round.objects.filter(pk__in=batch).delete()
        deleted += len(batch)
