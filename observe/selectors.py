"""Read side of observe: round queries shared by the API, the history page and the live stream."""

from __future__ import annotations

import base64
import binascii
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Count, Exists, F, Model, OuterRef, Q, QuerySet
from django.urls import reverse

from core.text import dot_segment
from core.vocabulary import IN_PROGRESS, KINDS
from observe.domain.events import stored_event
from observe.domain.rounds import AssembledRound, assemble, assembly_round
from observe.models import Round, RoundTool
from observe.partitions import partitioned
from observe.store import event_whole
from policy.versions import version_index

#: "only rounds with …" kinds and the counter column each one reads.
KIND_COLUMNS = {name: kind.counter for name, kind in KINDS.items()}
#: ``has=drift``: the runtime did not do what the version its round names says (issue 13).
DRIFT = "drift"
#: Every name ``has`` takes (DESIGN §6): the round kinds, then drift.
HAS_NAMES = (*KIND_COLUMNS, DRIFT)


#: The largest id a row can have (a signed 64-bit column).
MAX_ROW_ID = 2**63 - 1


class BadCursor(ValueError):
    """A ``before`` cursor that this server did not hand out."""


#: The most distinct values :func:`distinct_values` reads.
DISTINCT_MAX = 1000


def distinct_values(model: type[Model], column: str, limit: int = DISTINCT_MAX) -> list[str]:
    """The distinct values of an indexed text column, in order: one index search per value (a
    recursive query), instead of a scan of every row (millions of rounds and tool rows)."""
    table = connection.ops.quote_name(model._meta.db_table)
    name = connection.ops.quote_name(column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE v(x) AS (SELECT min({name}) FROM {table} UNION ALL"
            f" SELECT (SELECT min({name}) FROM {table} WHERE {name} > v.x) FROM v"
            f" WHERE v.x IS NOT NULL) SELECT x FROM v WHERE x IS NOT NULL LIMIT %s",
            [limit],
        )
        return [row[0] for row in cursor.fetchall()]


@dataclass(frozen=True)
class RoundFilter:
    """Which rounds a listener wants: every condition must hold (``has`` kinds combine with AND)."""

    agent: str | None = None
    has: frozenset[str] = field(default_factory=frozenset)
    #: A case-insensitive substring of a tool id the round used (DESIGN §6).
    tool: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    #: A substring of the turn id.
    turn: str | None = None
    #: One of :data:`core.vocabulary.OUTCOME_FILTERS`.
    outcome: str | None = None
    #: The rounds credited to one version (DESIGN §6): its number, and when it was credited
    #: per agent, ``(agent, policy hash, from, until)`` (``policy.versions.VersionIndex``).
    version: int | None = None
    version_windows: tuple[tuple[str, str, datetime, datetime | None], ...] = ()

    def apply(self, rounds: QuerySet[Round]) -> QuerySet[Round]:
        # Stored ids hold no control characters (ingest refuses them), and PostgreSQL cannot
        # even compare text with a NUL (a 500 there): a filter holding one matches nothing.
        if any("\x00" in text for text in (self.agent, self.tool, self.turn) if text):
            return rounds.none()
        if self.agent:
            rounds = rounds.filter(agent=self.agent)
        for kind in sorted(self.has):
            if kind == DRIFT:
                rounds = rounds.filter(drift=True)
            else:
                rounds = rounds.filter(**{f"{KIND_COLUMNS[kind]}__gt": 0})
        if self.tool:
            # The tool ids holding the text (a few, from the index), then a semi-join on the
            # round's own partition: no join duplicates to remove with DISTINCT over the wide
            # rows, no scan of every tool row (both were seconds on a month of rounds).
            needle = self.tool.upper()
            names = [
                name for name in distinct_values(RoundTool, "tool_id") if needle in name.upper()
            ]
            used = RoundTool.objects.filter(
                round_id=OuterRef("pk"), day=OuterRef("day"), tool_id__in=names
            )
            rounds = rounds.filter(Exists(used))
        if self.turn:
            rounds = rounds.filter(turn_id__contains=self.turn)
        if self.outcome == IN_PROGRESS:
            rounds = rounds.filter(outcome__isnull=True)
        elif self.outcome:
            rounds = rounds.filter(outcome=self.outcome)
        if self.since:
            rounds = rounds.filter(started_at__gte=self.since)
        if self.until:
            rounds = rounds.filter(started_at__lt=self.until)
        if self.version is not None:
            credited = Q(pk__in=[])
            for agent, digest, start, until in self.version_windows:
                window = Q(agent=agent, policy_hash=digest, started_at__gte=start)
                if until is not None:
                    window &= Q(started_at__lt=until)
                credited |= window
            rounds = rounds.filter(credited)
        return rounds

    def matches(self, row: Round) -> bool:
        """The same test for one row (the live stream checks each changed round)."""
        return self.apply(Round.objects.filter(pk=row.pk)).exists()


def encode_cursor(row: Any) -> str:
    raw = f"{row.started_at.isoformat()}|{row.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        started_text, pk_text = base64.urlsafe_b64decode(padded).decode().split("|")
        started, pk = datetime.fromisoformat(started_text), int(pk_text)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BadCursor("the before cursor is not one this server handed out") from exc
    # A forged cursor must not reach the database: a naive time compares wrongly, and an id past
    # 64 bits or a time that leaves the calendar in UTC overflows the query (a 500).
    if started.utcoffset() is None or not 0 < pk <= MAX_ROW_ID:
        raise BadCursor("the before cursor is not one this server handed out")
    try:
        return started.astimezone(UTC), pk
    except OverflowError:
        raise BadCursor("the before cursor is not one this server handed out") from None


def rounds_page(
    round_filter: RoundFilter, *, limit: int, before: str | None = None, keys_only: bool = False
) -> tuple[list[Any], str | None]:
    """Newest first; ``before`` continues after the last round of the previous page.
    ``keys_only``: named tuples of the key, ``started_at``, ``pk`` and ``assembly`` instead of
    rows, for readers of many rounds (the impact replay: building whole rows of 100k rounds was
    most of its time)."""
    rounds = round_filter.apply(Round.objects.all())
    newest = datetime.now(UTC)
    if round_filter.until is not None:
        newest = min(newest, round_filter.until)
    if before:
        started, pk = decode_cursor(before)
        newest = min(newest, started)
        # ``started_at <= …`` too: a bound the index scan starts from (the OR alone is a filter
        # over every newer row, so each page deep in a month cost more than the last).
        rounds = rounds.filter(started_at__lte=started).filter(
            Q(started_at__lt=started) | Q(started_at=started, pk__lt=pk)
        )
    if keys_only:
        rounds = rounds.values_list(  # type: ignore[assignment]
            "agent", "turn_id", "iteration", "started_at", "pk", "assembly", named=True
        )
    floor = _utc_day(round_filter.since) if round_filter.since else None
    page = newest_rounds(rounds, limit + 1, newest=_utc_day(newest), floor=floor)
    next_cursor = encode_cursor(page[limit - 1]) if len(page) > limit else None
    return page[:limit], next_cursor


#: How many of the newest days :func:`newest_rounds` asks first, one try after another, before
#: every day's partition.
DAY_SPANS = (1, 2, 4, 8)


def newest_rounds(
    rounds: QuerySet[Any], count: int, *, newest: date | None, floor: date | None
) -> list[Any]:
    """The first ``count`` of ``rounds`` newest first (``-started_at, -pk``), exactly as that
    order over every row would give them.

    On PostgreSQL's partitioned store the order over every row is a merge of every day's
    partition's index (~38), whose pages a store larger than memory reads from disk. So the
    newest days are asked first: partitions ``day >= first`` (pruned at plan time), ``first``
    going back ``DAY_SPANS`` days from ``newest`` (the cursor's or ``until``'s day, else
    today), then every day. The answer is exact, not a guess: a round's ``day`` is the UTC day
    of its ``started_at`` as first stored, and ``started_at`` moves later only when a
    ``round.started`` arrives after other events of its round (``observe.domain.rounds``:
    the earliest ``round.started``, else the earliest event), by however much its time says. A
    round of an older partition (``day < first``) is therefore either *moved* (its
    ``started_at``'s UTC day after its ``day``: read apart, from the small partial index
    ``round_moved``, migration 0015) or started before ``first``'s midnight. If the newest
    days fill the page with rounds started at or after that midnight, every unmoved round of
    an older day sorts after the page: the page is the merge of the newest days' and the
    moved rounds'. With ``floor`` (the day of ``since``) at or after ``first``, no unmoved
    round of an older day matches at all (docs/performance.md, "The pages bounded by day").
    """
    ordered = rounds.order_by("-started_at", "-pk")
    if not partitioned() or newest is None:
        return list(ordered[:count])
    for span in DAY_SPANS:
        if newest - date.min < timedelta(days=span):  # a time at the calendar's start
            break
        first = newest - timedelta(days=span - 1)
        page = list(ordered.filter(day__gte=first)[:count])
        midnight = datetime.combine(first, time.min, tzinfo=UTC)
        full = len(page) == count and page[-1].started_at >= midnight
        if floor is not None and floor >= first:
            since = datetime.combine(floor, time.min, tzinfo=UTC)
            bound = page[-1].started_at if len(page) == count else since
        elif full:
            bound = page[-1].started_at
        else:
            continue
        moved = _moved_rounds(ordered, before=first, since=bound)
        if moved is not None:
            return sorted([*page, *moved], key=_newest_key, reverse=True)[:count]
    return list(ordered[:count])


#: The most moved rounds :func:`_moved_rounds` reads before asking every day instead.
MOVED_MAX = 1000
#: The moved rounds' keys: the condition is the ``round_moved`` index's (migration 0015), in
#: its order. Planned each time: a generic plan (``observe.store.prepared``) locks every day's
#: partition when it runs, which took longer (2.7 ms p50 at 6M events against 2.3).
MOVED_SQL = (
    "SELECT id, day FROM observe_round WHERE day < %s AND started_at >= %s"
    " AND day < (started_at AT TIME ZONE 'UTC')::date ORDER BY started_at DESC, id DESC LIMIT %s"
)


def _moved_rounds(ordered: QuerySet[Any], *, before: date, since: datetime) -> list[Any] | None:
    """The rows of ``ordered`` (at most ``MOVED_MAX``) of the days before ``before`` whose
    ``started_at`` moved past their day, to at or after ``since``; None if there are more. Their
    keys first, with no other condition: the ``round_moved`` index answers alone (with the
    filter's conditions the planner walked a whole day's index of the agent, the moved
    condition guessed true of a third of its rows: 340 ms at 6M events)."""
    with connection.cursor() as cursor:
        cursor.execute(MOVED_SQL, [before, since, MOVED_MAX + 1])
        keys = cursor.fetchall()
    if len(keys) > MOVED_MAX:
        return None
    if not keys:
        return []
    return list(
        ordered.filter(pk__in=[pk for pk, _ in keys], day__in={day for _, day in keys})[:MOVED_MAX]
    )


def _utc_day(moment: datetime) -> date | None:
    """The UTC day of ``moment``; None past the calendar (a ``since`` or ``until`` of its
    first or last day in another zone)."""
    try:
        return moment.astimezone(UTC).date()
    except OverflowError:
        return None


def _newest_key(row: Any) -> tuple[datetime, int]:
    return row.started_at, row.pk


def longest_rounds(round_filter: RoundFilter, *, limit: int) -> list[Round]:
    """The longest finished rounds of the search, longest first (the history sorted by
    duration). On PostgreSQL read in that order from the ``round_longest`` index (migration
    0014: the same expression and condition), not sorted from every round."""
    rounds = round_filter.apply(Round.objects.filter(finished_at__isnull=False))
    ordered = rounds.annotate(duration=F("finished_at") - F("started_at")).order_by(
        "-duration", "-pk"
    )
    return list(ordered[:limit])


def rounds_changed_since(
    round_filter: RoundFilter, version: int, *, limit: int = 200
) -> list[Round]:
    """Rounds changed after ``version`` that match, oldest change first (the live stream)."""
    rounds = round_filter.apply(Round.objects.filter(version__gt=version))
    return list(rounds.order_by("version")[:limit])


def latest_version() -> int:
    row = Round.objects.order_by("-version").values_list("version", flat=True).first()
    return int(row or 0)


def round_get(agent: str, turn_id: str, iteration: int) -> Round | None:
    return Round.objects.filter(agent=agent, turn_id=turn_id, iteration=iteration).first()


def round_assembled(row: Round) -> AssembledRound:
    """The full round (attempts, actions, events) from its stored events."""
    key = (row.agent, row.turn_id, row.iteration)
    rows = row.events.values_list("event_id", "type", "ts", "data")
    return assemble(
        stored_event(event_whole(data, event_id, event_type, ts, key))
        for event_id, event_type, ts, data in rows
    )


def round_summary(row: Round) -> AssembledRound:
    """The round from its row's assembly alone (attempts and actions; no events)."""
    return assembly_round((row.agent, row.turn_id, row.iteration), row.assembly)


def round_ids_in_path(agent: str, turn_id: str) -> bool:
    """Whether a round's ids can be the path ``<agent>/<turn_id>/<iteration>/`` (§4): the agent
    one segment, neither a ``.``/``..`` segment a browser would resolve elsewhere in the site,
    and no control character (the route's ``<path:>`` cannot match a line break)."""
    if not agent or "/" in agent or dot_segment(agent) or dot_segment(turn_id) or not turn_id:
        return False
    return not any(unicodedata.category(char) == "Cc" for char in agent + turn_id)


def round_ids_query(agent: str, turn_id: str, iteration: int) -> str:
    """The ids as a query string: any stored text fits (quoted), nothing is resolved."""
    return urlencode({"agent": agent, "turn_id": turn_id, "iteration": iteration})


def round_url(row: Round | AssembledRound) -> str:
    """The round page (§4): the iteration is the last segment, a turn_id may contain '/'. Ids
    that cannot form that path (ingest refuses them now; older rounds may hold them) link to
    the same page by a query string instead: no page depends on reversing stored text."""
    if round_ids_in_path(row.agent, row.turn_id):
        return reverse(
            "observe:round",
            kwargs={"agent": row.agent, "turn_id": row.turn_id, "iteration": row.iteration},
        )
    query = round_ids_query(row.agent, row.turn_id, row.iteration)
    return f"{reverse('observe:round-by-ids')}?{query}"


@dataclass(frozen=True)
class RoundsOverview:
    """Live rounds at a glance, for the overview page."""

    rounds: int
    last_started_at: datetime | None
    last_hour: int
    #: Per published version, newest first: (version, rounds checked, rounds that drifted).
    drift_by_version: tuple[tuple[int, int, int], ...] = ()
    #: Rounds of the last hour with a rejection / with a timeout.
    rejected_last_hour: int = 0
    timed_out_last_hour: int = 0


def rounds_overview(now: datetime) -> RoundsOverview:
    newest = Round.objects.order_by("-started_at").values_list("started_at", flat=True).first()
    return RoundsOverview(
        rounds=Round.objects.count(),
        last_started_at=newest,
        last_hour=Round.objects.filter(started_at__gte=now - timedelta(hours=1)).count(),
        drift_by_version=_drift_by_version(),
        **_problems_last_hour(now),
    )


def _problems_last_hour(now: datetime) -> dict[str, int]:
    found = Round.objects.filter(started_at__gte=now - timedelta(hours=1)).aggregate(
        rejected=Count("id", filter=Q(rejections__gt=0)),
        timed_out=Count("id", filter=Q(timeouts__gt=0)),
    )
    return {
        "rejected_last_hour": int(found["rejected"] or 0),
        "timed_out_last_hour": int(found["timed_out"] or 0),
    }


def _drift_by_version() -> tuple[tuple[int, int, int], ...]:
    """How often the runtime did what each version says, over the rounds checked under it."""
    versions = version_index()
    totals: dict[int, list[int]] = {}
    # Per round, not per hash: two versions can share a hash (a rollback's copy), and each
    # round belongs to the one in force when it started.
    checked = Round.objects.filter(drift__isnull=False).values_list(
        "agent", "policy_hash", "started_at", "drift"
    )
    for agent, policy_hash, started_at, drift in checked.iterator():
        number = versions.credit(agent, policy_hash, started_at)
        if number is not None:
            total = totals.setdefault(number, [0, 0])
            total[0] += 1
            total[1] += int(bool(drift))
    return tuple((number, *totals[number]) for number in sorted(totals, reverse=True))  # type: ignore[misc]
