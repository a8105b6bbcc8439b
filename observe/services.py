"""Ingest: validate → store (idempotent by event_id) → re-assemble rounds → tell the live view.

The runtime may send an event more than once and in any order: an ``event_id`` is stored once,
and a round is always re-assembled from all its stored events, so arrival order never matters.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import IntegrityError, transaction

from observe.domain.events import Event, EventError, parse_event, same_content
from observe.domain.rounds import Round as AssembledRound
from observe.domain.rounds import assemble
from observe.models import Event as StoredEvent
from observe.models import Round, RoundTool, StreamCounter

logger = logging.getLogger(__name__)

LIVE_GROUP = "live-rounds"
REUSED_ID = "event_id reused with different content"
#: Storage limits every event is held to (see ``_unstorable``).
MAX_STORED_INT = 2**63 - 1
MAX_NESTING = 64
#: Rounds deleted per transaction by ``rounds_prune``: short write locks while the server runs.
PRUNE_BATCH = 500


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    version: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "rejected": self.rejected}


def _next_versions(count: int) -> list[int]:
    """Take ``count`` consecutive version numbers (inside the caller's transaction)."""
    counter, _ = StreamCounter.objects.select_for_update().get_or_create(
        pk=StreamCounter.SINGLETON_ID
    )
    first = counter.value + 1
    counter.value += count
    counter.save(update_fields=["value"])
    return list(range(first, first + count))


def _triage(raw_events: Sequence[Any], result: IngestResult) -> dict[str, tuple[int, Event]]:
    """Parse every event; keep the new ones, count duplicates, report the invalid by index.

    A repeated ``event_id`` is compared with the stored event when there is one, else with its
    first valid occurrence in the batch: the stored content is the truth once it exists.
    """
    parsed: list[tuple[int, Event]] = []
    for index, raw in enumerate(raw_events):
        try:
            parsed.append((index, _parse(raw)))
        except EventError as exc:
            result.rejected.append({"index": index, "error": str(exc)})
    ids = list({event.event_id for _, event in parsed})
    known: dict[str, Event] = {
        stored.event_id: parse_event(stored.data)
        for stored in StoredEvent.objects.filter(event_id__in=ids)
    }
    fresh: dict[str, tuple[int, Event]] = {}
    for index, event in parsed:
        reference = known.get(event.event_id)
        if reference is None:
            known[event.event_id] = event
            fresh[event.event_id] = (index, event)
        elif same_content(reference, event):
            result.duplicates += 1
        else:
            result.rejected.append({"index": index, "error": REUSED_ID})
    result.rejected.sort(key=lambda item: item["index"])
    return fresh


def _parse(raw: Any) -> Event:
    """``parse_event`` plus the limits of storage (any JSON database, SQLite or PostgreSQL)."""
    event = parse_event(raw)
    problem = _unstorable(event.data)
    if problem is not None:
        raise EventError(problem)
    if "/" in event.agent:
        # A round's address (page and API) is <agent>/<turn_id>/<iteration> and only the turn_id
        # may contain "/": a round of such an agent could be stored but never opened.
        raise EventError("agent must not contain '/'")
    return event


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
            if depth >= MAX_NESTING:
                return f"{name} nests deeper than {MAX_NESTING} levels"
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


#: The Round columns assembly recomputes.
_ASSEMBLED_COLUMNS = [
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
    "version",
]

RoundKey = tuple[str, str, int]


def _apply_assembly(
    row: Round, assembled: AssembledRound, version: int, known_agents: frozenset[str] | None
) -> None:
    """Copy what the events say about the round onto its row."""
    row.started_at = assembled.started_at
    row.finished_at = assembled.finished_at
    row.generation_finished_at = assembled.generation_finished_at
    row.outcome = assembled.outcome
    row.policy_hash = assembled.policy_hash
    row.max_actions = assembled.max_actions
    row.actions = assembled.counts["actions"]
    row.rejections = assembled.counts["rejections"]
    row.early_starts = assembled.counts["early_starts"]
    row.dedups = assembled.counts["dedups"]
    row.timeouts = assembled.counts["timeouts"]
    if known_agents is not None:
        row.agent_in_policy = row.agent in known_agents
    row.version = version


def _round_rows(
    by_round: dict[RoundKey, list[Event]], versions: list[int]
) -> dict[RoundKey, Round]:
    """The rows of these rounds, creating the missing ones (two queries, whatever the count)."""
    agents = {key[0] for key in by_round}
    turns = {key[1] for key in by_round}
    rows = {
        (row.agent, row.turn_id, row.iteration): row
        for row in Round.objects.filter(agent__in=agents, turn_id__in=turns)
        if (row.agent, row.turn_id, row.iteration) in by_round
    }
    missing = [
        Round(
            agent=key[0],
            turn_id=key[1],
            iteration=key[2],
            started_at=min(e.ts for e in events),
            version=version,
        )
        for (key, events), version in zip(by_round.items(), versions, strict=True)
        if key not in rows
    ]
    # bulk_create sets primary keys on SQLite and PostgreSQL (RETURNING).
    for row in Round.objects.bulk_create(missing):
        rows[(row.agent, row.turn_id, row.iteration)] = row
    return rows


def _store(fresh: dict[str, tuple[int, Event]], known_agents: frozenset[str] | None) -> int:
    """Store the new events and re-assemble every round they touch from ALL its stored events
    (so arrival order never matters). A fixed number of queries per batch, not per round."""
    by_round: dict[RoundKey, list[Event]] = defaultdict(list)
    for _, event in fresh.values():
        by_round[event.round_key].append(event)
    versions = _next_versions(len(by_round))
    rows = _round_rows(by_round, versions)
    StoredEvent.objects.bulk_create(
        [
            StoredEvent(
                event_id=e.event_id, round=rows[key], type=e.type, ts=e.ts, data=dict(e.data)
            )
            for key, events in by_round.items()
            for e in events
        ]
    )
    round_ids = [row.pk for row in rows.values()]
    stored: dict[int, list[Event]] = defaultdict(list)
    for round_id, data in StoredEvent.objects.filter(round_id__in=round_ids).values_list(
        "round_id", "data"
    ):
        stored[round_id].append(parse_event(data))
    present: dict[int, set[str]] = defaultdict(set)
    for round_id, tool_id in RoundTool.objects.filter(round_id__in=round_ids).values_list(
        "round_id", "tool_id"
    ):
        present[round_id].add(tool_id)
    new_tools: list[RoundTool] = []
    for key, version in zip(by_round, versions, strict=True):
        row = rows[key]
        assembled = assemble(stored[row.pk])
        _apply_assembly(row, assembled, version, known_agents)
        new_tools += [
            RoundTool(round=row, tool_id=t) for t in sorted(assembled.tool_ids - present[row.pk])
        ]
    # One plain UPDATE per round: bulk_update's CASE expressions cost more than they save here.
    for row in rows.values():
        Round.objects.filter(pk=row.pk).update(**{c: getattr(row, c) for c in _ASSEMBLED_COLUMNS})
    RoundTool.objects.bulk_create(new_tools)
    return versions[-1]


def events_ingest(
    raw_events: Sequence[Any], *, known_agents: frozenset[str] | None = None
) -> IngestResult:
    """Store a batch: valid events are kept even when others are invalid (reported by index).

    ``known_agents``: the agents of the policy in force, to mark rounds "agent not in policy".
    """
    for attempt in (1, 2):
        result = IngestResult()
        try:
            with transaction.atomic():
                fresh = _triage(raw_events, result)
                if fresh:
                    result.version = _store(fresh, known_agents)
                result.accepted = len(fresh)
        except IntegrityError:
            # A concurrent batch stored one of these event_ids first: triage again, once.
            if attempt == 2:
                raise
            continue
        break
    if result.version is not None:
        broadcast_change(result.version)
    return result


def broadcast_change(version: int) -> None:
    """Wake the live views: "rounds changed up to ``version``" (they fetch what they lack)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(LIVE_GROUP, {"type": "rounds.changed", "version": version})
    except Exception:  # the events are stored; listeners resync on their next tick
        logger.exception("could not notify the live view of version %s", version)


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
