"""The live and history filters: read from a query string, written back into links."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from django.http import QueryDict
from django.utils import timezone

from core.numbers import parse_whole
from core.timewindow import TimeWindowError, parse_moment
from core.vocabulary import OUTCOME_FILTERS, ROUND_KINDS
from observe.models import Round
from observe.selectors import (
    HAS_NAMES,
    RoundFilter,
    distinct_values,
)
from policy.selectors import draft_agent_names

#: "only rounds with …" choices, in the order the filter form shows them.
KIND_LABELS: Final[Mapping[str, str]] = {kind.name: kind.label for kind in ROUND_KINDS}
#: Longest params text a card shows (the round page shows all of it).


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
    has = frozenset(kind for kind in query.getlist("has") if kind in HAS_NAMES)
    if not full:
        return ParsedFilter(RoundFilter(agent=agent, has=has))
    errors: list[str] = []
    tool = query.get("tool", "").strip() or None
    turn = query.get("turn", "").strip() or None
    outcome = query.get("outcome", "").strip() or None
    if outcome is not None and outcome not in OUTCOME_FILTERS:
        errors.append(
            f"“{outcome[:60]}” is not an outcome (ignored); use {', '.join(OUTCOME_FILTERS)}."
        )
        outcome = None
    since = _local_time(query.get("since", ""), "since", errors)
    until = _local_time(query.get("until", ""), "until", errors)
    version, windows = _version(query.get("version", ""), errors)
    return ParsedFilter(
        RoundFilter(
            agent=agent,
            has=has,
            tool=tool,
            since=since,
            until=until,
            turn=turn,
            outcome=outcome,
            version=version,
            version_windows=windows,
        ),
        tuple(errors),
    )


def _version(
    value: str, errors: list[str]
) -> tuple[int | None, tuple[tuple[str, str, datetime, datetime | None], ...]]:
    """``version=N``: the rounds credited to version N (the one in force when they ran)."""
    from policy.versions import version_index

    value = value.strip()
    if not value:
        return None, ()
    if not (value.isascii() and value.isdigit() and len(value) <= 9):
        errors.append(f"“{value[:60]}” is not a version number (ignored).")
        return None, ()
    return int(value), version_index().windows(int(value))


def _local_time(value: str, name: str, errors: list[str]) -> datetime | None:
    """A bound as ``core.timewindow`` reads it (a ``datetime-local`` value has no offset: UTC,
    the server's time zone); one that cannot be read is named and ignored."""
    try:
        return parse_moment(name, value, now=timezone.now())
    except TimeWindowError:
        errors.append(
            f"“{value.strip()[:60]}” is not a time ({name} was ignored); use YYYY-MM-DDTHH:MM or a"
            " span back from now like 15m, 24h or 7d."
        )
        return None


def filter_query(round_filter: RoundFilter) -> list[tuple[str, str]]:
    """The query-string pairs that give this filter back (for links and the websocket URL)."""
    pairs: list[tuple[str, str]] = []
    if round_filter.agent:
        pairs.append(("agent", round_filter.agent))
    pairs.extend(("has", kind) for kind in KIND_LABELS if kind in round_filter.has)
    if round_filter.tool:
        pairs.append(("tool", round_filter.tool))
    if round_filter.turn:
        pairs.append(("turn", round_filter.turn))
    if round_filter.outcome:
        pairs.append(("outcome", round_filter.outcome))
    if round_filter.version is not None:
        pairs.append(("version", str(round_filter.version)))
    for name in ("since", "until"):
        value: datetime | None = getattr(round_filter, name)
        if value is not None:
            local = timezone.localtime(value).replace(tzinfo=None)
            precision = "microseconds" if local.microsecond else "seconds"
            pairs.append((name, local.isoformat(timespec=precision)))
    return pairs


def parse_since(value: str | None) -> int | None:
    """The stream's ``since`` version; ``None`` when absent or not a non-negative integer."""
    return None if value is None else parse_whole(value)


def known_agents(extra: Iterable[str] = ()) -> list[str]:
    """Agents for the filter select: those seen in rounds and those in the draft policy."""
    seen = set(distinct_values(Round, "agent"))
    return sorted(seen | set(draft_agent_names()) | {name for name in extra if name})
