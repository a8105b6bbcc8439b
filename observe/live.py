"""What the live view, the round page and the history show: filters, cards, counters, events.

Views and the websocket consumer both build their screens from here, so a card streamed over the
websocket is the card the page renders (one ``{% partialdef card %}``, one :class:`Card`).
Everything here computes plain values (text, numbers); the templates escape them. Nothing in this
module builds HTML. The round page's timeline geometry is in :mod:`observe.timeline`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.db.models import Count, QuerySet, Sum
from django.http import QueryDict
from django.template.loader import render_to_string
from django.urls import NoReverseMatch
from django.utils import timezone

from observe.domain.events import (
    ACTION_OBSERVED,
    Event,
    format_ts,
)
from observe.domain.kinds import ROUND_KINDS
from observe.domain.rounds import Attempt, RoundAction, assembly_params
from observe.domain.rounds import Round as AssembledRound
from observe.models import Round
from observe.selectors import (
    KIND_COLUMNS,
    RoundFilter,
    latest_version,
    round_summary,
    round_url,
    rounds_changed_since,
)
from policy.selectors import draft_agent_names

#: Most cards the live page holds (and the most one stream message carries).
MAX_CARDS: Final = 200
#: "only rounds with …" choices, in the order the filter form shows them.
KIND_LABELS: Final[Mapping[str, str]] = {kind.name: kind.label for kind in ROUND_KINDS}
#: Longest params text a card shows (the round page shows all of it).
PARAMS_PREVIEW: Final = 160
RATE_WINDOW: Final = timedelta(seconds=60)


# --- filters ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedFilter:
    """A filter read from a query string, with what could not be read (said on the page)."""

    round_filter: RoundFilter
    errors: tuple[str, ...] = ()


def parse_filter(query: QueryDict, *, full: bool = False) -> ParsedFilter:
    """The live filter (agent, has) from a query string; ``full`` adds tool, since and until.

    Unknown ``has`` kinds are ignored (a form never sends them); a time that is not one is
    reported and ignored rather than failing the page.
    """
    agent = query.get("agent", "").strip() or None
    has = frozenset(kind for kind in query.getlist("has") if kind in KIND_COLUMNS)
    if not full:
        return ParsedFilter(RoundFilter(agent=agent, has=has))
    errors: list[str] = []
    tool = query.get("tool", "").strip() or None
    since = _local_time(query.get("since", ""), "since", errors)
    until = _local_time(query.get("until", ""), "until", errors)
    return ParsedFilter(
        RoundFilter(agent=agent, has=has, tool=tool, since=since, until=until), tuple(errors)
    )


def _local_time(value: str, name: str, errors: list[str]) -> datetime | None:
    """A ``datetime-local`` value (no zone: the server's time zone) or any ISO 8601 time."""
    value = value.strip()
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        errors.append(f"“{value}” is not a time ({name} was ignored); use YYYY-MM-DDTHH:MM.")
        return None
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, timezone.get_current_timezone())
    return parsed


def filter_query(round_filter: RoundFilter) -> list[tuple[str, str]]:
    """The query-string pairs that give this filter back (for links and the websocket URL)."""
    pairs: list[tuple[str, str]] = []
    if round_filter.agent:
        pairs.append(("agent", round_filter.agent))
    pairs.extend(("has", kind) for kind in KIND_LABELS if kind in round_filter.has)
    if round_filter.tool:
        pairs.append(("tool", round_filter.tool))
    for name in ("since", "until"):
        value: datetime | None = getattr(round_filter, name)
        if value is not None:
            local = timezone.localtime(value).replace(tzinfo=None)
            precision = "microseconds" if local.microsecond else "seconds"
            pairs.append((name, local.isoformat(timespec=precision)))
    return pairs


def parse_since(value: str | None) -> int | None:
    """The stream's ``since`` version; ``None`` when absent or not a non-negative integer."""
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value)


# --- cards --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chip:
    """One fact about an action: ``kind`` is its CSS class, ``detail`` the words beside it."""

    kind: str
    label: str
    detail: str = ""
    hint: str = ""


@dataclass(frozen=True)
class ActionRow:
    index: int
    name: str
    is_tool: bool
    params: str | None
    chips: tuple[Chip, ...]


@dataclass(frozen=True)
class AttemptRows:
    attempt: int
    actions: tuple[ActionRow, ...]


@dataclass(frozen=True)
class Card:
    """A round as the live list and the stream show it."""

    pk: int
    version: int
    agent: str
    turn_id: str
    iteration: int
    started_at: datetime
    outcome: str | None
    agent_in_policy: bool
    url: str | None
    attempts: tuple[AttemptRows, ...]

    @property
    def multi_attempt(self) -> bool:
        return len(self.attempts) > 1

    @property
    def outcome_text(self) -> str:
        return self.outcome or "in progress"


def seconds(ms: float, *, digits: int = 1) -> str:
    """Milliseconds as seconds for people: ``1234`` → ``1.2 s``, ``30000`` → ``30 s``."""
    text = f"{ms / 1000:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{ms / 1000:.0f}"
    return f"{text} s"


def safe_round_url(round_: Round | AssembledRound) -> str | None:
    """The round page, or ``None`` for a round whose agent cannot be part of a URL ("/")."""
    try:
        return round_url(round_)
    except NoReverseMatch:
        return None


def action_chips(action: RoundAction, attempt: Attempt) -> tuple[Chip, ...]:
    """The chips of one action: its verdict, then what happened to its call."""
    chips: list[Chip] = []
    if action.verdict == "accepted":
        chips.append(Chip("accepted", "accepted"))
    elif action.verdict == "rejected":
        chips.append(Chip("rejected", "rejected", action.explanation or action.code or ""))
    else:
        chips.append(Chip("pending", "no verdict yet"))
    if action.early_started_at is not None:
        chips.append(Chip("early", "started early", early_lead(action, attempt)))
    if action.dedup is not None:
        reused = action.tool_call_id or "the earlier call"
        chips.append(Chip("dedup", "dedup", f"reused {reused} (matched by {action.dedup.match})"))
    if action.timeout is not None:
        timeout = action.timeout
        chips.append(
            Chip(
                "timeout",
                "timeout",
                # Milliseconds matter here: a call stopped just past its limit.
                f"after {seconds(timeout.elapsed_ms, digits=3)}, limit {seconds(timeout.limit_ms)}",
                f"try {timeout.async_alternative}" if timeout.async_alternative else "",
            )
        )
    elif action.status == "error":
        chips.append(Chip("error", "error"))
    return tuple(chips)


def early_lead(action: RoundAction, attempt: Attempt) -> str:
    started = action.early_started_at
    finished = attempt.generation_finished_at
    if started is None or finished is None:
        return "while generation was still running"
    lead_ms = (finished - started) / timedelta(milliseconds=1)
    if lead_ms >= 0:
        return f"{seconds(lead_ms)} before generation finished"
    return f"{seconds(-lead_ms)} after generation finished"


def _params_by_slot(events: Iterable[Event]) -> dict[tuple[int, int], Any]:
    found: dict[tuple[int, int], Any] = {}
    for event in events:
        index = event.action_index
        if event.type == ACTION_OBSERVED and index is not None and "params" in event.data:
            found.setdefault((event.attempt, index), event.data["params"])
    return found


def params_text(params: Any, *, limit: int | None = PARAMS_PREVIEW) -> str:
    text = json.dumps(params, ensure_ascii=False, default=str)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def card_for(row: Round) -> Card:
    """The card of a stored round, from its row alone (the assembly holds actions and params)."""
    assembled = round_summary(row)
    params = assembly_params(row.assembly)
    attempts = tuple(
        AttemptRows(
            attempt=attempt.attempt,
            actions=tuple(
                _action_row(action, attempt, params.get((attempt.attempt, action.index)))
                for action in attempt.actions
            ),
        )
        for attempt in assembled.attempts
    )
    return Card(
        pk=row.pk,
        version=row.version,
        agent=row.agent,
        turn_id=row.turn_id,
        iteration=row.iteration,
        started_at=row.started_at,
        outcome=row.outcome,
        agent_in_policy=row.agent_in_policy,
        url=safe_round_url(row),
        attempts=attempts,
    )


def _action_row(action: RoundAction, attempt: Attempt, params: Any) -> ActionRow:
    name = action.tool_id or action.action or "(not observed yet)"
    return ActionRow(
        index=action.index,
        name=name,
        is_tool=action.tool_id is not None,
        params=params_text(params) if params is not None else None,
        chips=action_chips(action, attempt),
    )


def cards_for(rows: Sequence[Round]) -> list[Card]:
    """Cards for rows, in the rows' order (no query: each row holds its assembly)."""
    return [card_for(row) for row in rows]


# --- counters -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counters:
    """Totals for a filter, and the same for rounds started in the last minute."""

    rounds: int = 0
    rejections: int = 0
    early: int = 0
    dedups: int = 0
    timeouts: int = 0
    rate_rounds: int = 0
    rate_rejections: int = 0
    rate_early: int = 0
    rate_dedups: int = 0
    rate_timeouts: int = 0


def _totals(rounds: QuerySet[Round]) -> dict[str, int]:
    sums = rounds.aggregate(
        rounds=Count("pk"),
        rejections=Sum("rejections"),
        early=Sum("early_starts"),
        dedups=Sum("dedups"),
        timeouts=Sum("timeouts"),
    )
    return {name: int(value or 0) for name, value in sums.items()}


def counters_for(round_filter: RoundFilter, *, now: datetime | None = None) -> Counters:
    now = now or timezone.now()
    matching = round_filter.apply(Round.objects.all())
    if round_filter.tool:
        # The tool filter joins RoundTool; count each round once.
        matching = Round.objects.filter(pk__in=matching.values("pk"))
    totals = _totals(matching)
    recent = _totals(matching.filter(started_at__gte=now - RATE_WINDOW))
    return Counters(**totals, **{f"rate_{name}": value for name, value in recent.items()})


# --- the stream ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamUpdate:
    """What one refresh of a stream found: the version it has now seen up to, and a message
    to send (``None`` when nothing the listener shows has changed)."""

    version: int
    counters: Counters
    message: str | None
    cards: int = 0
    resync: bool = False


def stream_update(
    round_filter: RoundFilter,
    since: int,
    *,
    seq: int,
    shown: Counters | None,
    force: bool = False,
) -> StreamUpdate:
    """Everything that changed after ``since`` and matches, rendered as ONE stream message.

    The message appends the cards to ``#incoming`` and replaces ``#counters`` and ``#live-seq``
    (whose ``data-seq`` is ``seq``). When more rounds changed than the page can hold, the cards
    are left out and the sequence element asks the page to reload its list (``data-resync``).
    ``shown`` are the counters the listener has; no message is rendered when nothing changed
    (unless ``force``).
    """
    # Read first: every change up to here is committed, so the query below sees all of them
    # (versions are handed out under a lock held until commit, in commit order).
    seen = latest_version()
    rows = rounds_changed_since(round_filter, since, limit=MAX_CARDS + 1)
    resync = len(rows) > MAX_CARDS
    if resync:
        rows = []
        seen = latest_version()
    version = max([since, seen, *(row.version for row in rows)])
    counters = counters_for(round_filter)
    if not rows and not resync and not force and counters == shown:
        return StreamUpdate(version=version, counters=counters, message=None)
    message = render_to_string(
        "observe/live.html#stream",
        {
            "cards": cards_for(rows),
            "counters": counters,
            "oob": True,
            "seq": seq,
            "resync": resync,
        },
    )
    return StreamUpdate(
        version=version, counters=counters, message=message, cards=len(rows), resync=resync
    )


# --- the round page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRow:
    type: str
    ts: str
    attempt: int
    action_index: int | None
    data: str


def event_rows(round_: AssembledRound) -> list[EventRow]:
    return [
        EventRow(
            type=event.type,
            ts=format_ts(event.ts),
            attempt=event.attempt,
            action_index=event.action_index,
            data=json.dumps(dict(event.data), indent=2, ensure_ascii=False, default=str),
        )
        for event in round_.events
    ]


@dataclass(frozen=True)
class ActionDetail:
    """One row of the round page's actions table."""

    attempt: int
    action: RoundAction
    row: ActionRow
    params: str | None


def action_details(round_: AssembledRound) -> list[ActionDetail]:
    params = _params_by_slot(round_.events)
    details: list[ActionDetail] = []
    for attempt in round_.attempts:
        for action in attempt.actions:
            given = params.get((attempt.attempt, action.index))
            details.append(
                ActionDetail(
                    attempt=attempt.attempt,
                    action=action,
                    row=_action_row(action, attempt, given),
                    params=params_text(given, limit=None) if given is not None else None,
                )
            )
    return details


def known_agents(extra: Iterable[str] = ()) -> list[str]:
    """Agents for the filter select: those seen in rounds and those in the draft policy."""
    seen = set(Round.objects.values_list("agent", flat=True).distinct())
    return sorted(seen | set(draft_agent_names()) | {name for name in extra if name})
