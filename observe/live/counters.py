"""The live counters: totals for a filter and the same for rounds started in the last minute."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from core.vocabulary import ROUND_KINDS, RoundKind
from observe.domain.facts import RoundFacts
from observe.models import Round
from observe.round_counts import counted, counted_totals
from observe.selectors import DRIFT, RoundFilter

RATE_WINDOW: Final = timedelta(seconds=60)


# --- counters -----------------------------------------------------------------------------------


#: The counters in order: rounds, one per round kind (``RoundKind.tally``), drift.
COUNTER_NAMES: Final = ("rounds", *(kind.tally for kind in ROUND_KINDS), "drift")
_POSITION: Final = {name: position for position, name in enumerate(COUNTER_NAMES)}
_ZEROS: Final = (0,) * len(COUNTER_NAMES)


@dataclass(frozen=True)
class Counters:
    """Totals for a filter, and the same for rounds started in the last minute, in
    :data:`COUNTER_NAMES` order. Read by name too: ``counters.rejections``,
    ``counters.rate_rejections``; ``drift`` counts the rounds whose runtime did not do what
    their version says."""

    totals: tuple[int, ...] = _ZEROS
    rates: tuple[int, ...] = _ZEROS

    def __getattr__(self, name: str) -> int:
        values, key = (self.rates, name[5:]) if name.startswith("rate_") else (self.totals, name)
        if key not in _POSITION:
            raise AttributeError(name)
        return values[_POSITION[key]]

    @property
    def kinds(self) -> list[tuple[RoundKind, int, int]]:
        """Each round kind with its total and its rate, in table order (the live page's
        counters)."""
        return [
            (kind, self.totals[position], self.rates[position])
            for position, kind in enumerate(ROUND_KINDS, start=1)
        ]


def _totals(rounds: QuerySet[Round]) -> tuple[int, ...]:
    sums = rounds.aggregate(
        rounds=Count("pk"),
        **{kind.tally: Sum(kind.counter) for kind in ROUND_KINDS},
        drift=Count("pk", filter=Q(drift=True)),
    )
    return tuple(int(sums[name] or 0) for name in COUNTER_NAMES)


def _filter_totals(round_filter: RoundFilter, matching: QuerySet[Round]) -> tuple[int, ...]:
    """The filter's totals: from the kept counts (and the few drifted rounds, through their
    index) when they answer it, else from the rounds."""
    if round_filter.since or round_filter.until or not counted(round_filter):
        return _totals(matching)
    sums = counted_totals(round_filter.agent)
    drift = matching.filter(drift=True).count()
    return (sums["rounds"], *(sums[kind.counter] for kind in ROUND_KINDS), drift)


def counters_for(round_filter: RoundFilter, *, now: datetime | None = None) -> Counters:
    now = now or timezone.now()
    matching = round_filter.apply(Round.objects.all())
    if round_filter.tool:
        # The tool filter joins RoundTool; count each round once.
        matching = Round.objects.filter(pk__in=matching.values("pk"))
    return Counters(
        _filter_totals(round_filter, matching),
        _totals(_last_minute(matching, now)),
    )


def _last_minute(matching: QuerySet[Round], now: datetime) -> QuerySet[Round]:
    """The rounds of ``matching`` started in the last minute: from ``now`` less
    :data:`RATE_WINDOW` to the latest start ingest accepts now (``now`` plus the allowed clock
    skew). A round stored with a later start (an import, a clock set back) is not in the last
    minute: it counted in every viewer's rates until its start was a minute past, and each
    viewer's catch-up read all such rounds (issue 39: ~79k of them made the live view's p99
    seconds)."""
    latest = now + timedelta(seconds=settings.TRAITDECK_CLOCK_SKEW_S)
    return matching.filter(started_at__gte=now - RATE_WINDOW, started_at__lte=latest)


# --- kept incrementally -------------------------------------------------------------------------
#
# Ingest tells the live view, for every round a batch changed, what the round looked like before
# and after (its "facts"). A viewer's totals start from one query when it connects and then only
# add the difference each change makes to its filter: no viewer ever scans the rounds again.


def admits(round_filter: RoundFilter, facts: RoundFacts) -> bool:
    """Whether a round with these facts passes the filter (as ``RoundFilter.apply`` would)."""
    if round_filter.agent and facts.agent != round_filter.agent:
        return False
    if round_filter.has:
        present = {kind.name: facts.count(kind.name) for kind in ROUND_KINDS}
        present[DRIFT] = int(facts.drift)
        if not all(present[kind] > 0 for kind in round_filter.has):
            return False
    if round_filter.tool and round_filter.tool not in facts.tools:
        return False
    if round_filter.since or round_filter.until:
        moment = datetime.fromisoformat(facts.started_at)
        if round_filter.since and moment < round_filter.since:
            return False
        if round_filter.until and moment >= round_filter.until:
            return False
    return True


KIND_NAMES: Final = tuple(kind.name for kind in ROUND_KINDS)
#: What one round adds to a viewer's counters: 1 round, its actions of each kind, its drift.
_Sums = tuple[int, ...]


def _sums(facts: RoundFacts) -> _Sums:
    return (1, *facts.counts, int(facts.drift))


class Tally:
    """One viewer's counters, kept up to date from the facts of each change: totals and the
    per-minute sums change by the difference each round makes (no loop over rounds)."""

    def __init__(
        self,
        round_filter: RoundFilter,
        totals: _Sums,
        recent: Mapping[int, tuple[datetime, _Sums]],
    ) -> None:
        self.round_filter = round_filter
        self.totals = list(totals)
        #: Rounds of the filter started within the rate window: pk → (started_at, sums), their
        #: sums, and a heap of (started_at, pk) to let them leave the window in time order.
        self.recent: dict[int, tuple[datetime, _Sums]] = {}
        self.rates = [0] * len(COUNTER_NAMES)
        self.expiry: list[tuple[datetime, int]] = []
        for pk, (started, sums) in recent.items():
            self._enter(pk, started, sums)

    def _enter(self, pk: int, started: datetime, sums: _Sums) -> None:
        self.recent[pk] = (started, sums)
        for position, value in enumerate(sums):
            self.rates[position] += value
        heapq.heappush(self.expiry, (started, pk))

    def _leave(self, pk: int) -> None:
        entry = self.recent.pop(pk, None)
        if entry is not None:
            for position, value in enumerate(entry[1]):
                self.rates[position] -= value

    def apply(self, pk: int, old: RoundFacts | None, new: RoundFacts | None) -> None:
        for sign, facts in ((-1, old), (1, new)):
            if facts is not None and admits(self.round_filter, facts):
                for position, value in enumerate(_sums(facts)):
                    self.totals[position] += sign * value
        self._leave(pk)
        if new is not None and admits(self.round_filter, new):
            self._enter(pk, datetime.fromisoformat(new.started_at), _sums(new))

    def counters(self, now: datetime | None = None) -> Counters:
        horizon = (now or timezone.now()) - RATE_WINDOW
        while self.expiry and self.expiry[0][0] < horizon:
            started, pk = heapq.heappop(self.expiry)
            entry = self.recent.get(pk)
            if entry is not None and entry[0] == started:
                self._leave(pk)
        return Counters(tuple(self.totals), tuple(self.rates))


def tally_for(round_filter: RoundFilter, *, now: datetime | None = None) -> Tally:
    """A viewer's starting point: the filter's totals and its rounds of the last minute."""
    now = now or timezone.now()
    matching = round_filter.apply(Round.objects.all())
    if round_filter.tool:
        matching = Round.objects.filter(pk__in=matching.values("pk"))
    columns = [kind.counter for kind in ROUND_KINDS]
    recent = {
        pk: (started, (1, *counts, int(drift is True)))
        for pk, started, drift, *counts in _last_minute(matching, now).values_list(
            "pk", "started_at", "drift", *columns
        )
    }
    return Tally(round_filter, _filter_totals(round_filter, matching), recent)
