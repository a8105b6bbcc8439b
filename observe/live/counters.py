"""The live counters: totals for a filter and the same for rounds started in the last minute."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from observe.domain.facts import RoundFacts
from observe.domain.kinds import ROUND_KINDS
from observe.models import Round
from observe.selectors import DRIFT, RoundFilter

RATE_WINDOW: Final = timedelta(seconds=60)


# --- counters -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counters:
    """Totals for a filter, and the same for rounds started in the last minute."""

    rounds: int = 0
    rejections: int = 0
    early: int = 0
    dedups: int = 0
    timeouts: int = 0
    #: Rounds whose runtime did not do what their version says (issue 13).
    drift: int = 0
    rate_rounds: int = 0
    rate_rejections: int = 0
    rate_early: int = 0
    rate_dedups: int = 0
    rate_timeouts: int = 0
    rate_drift: int = 0


def _totals(rounds: QuerySet[Round]) -> dict[str, int]:
    sums = rounds.aggregate(
        rounds=Count("pk"),
        rejections=Sum("rejections"),
        early=Sum("early_starts"),
        dedups=Sum("dedups"),
        timeouts=Sum("timeouts"),
        drift=Count("pk", filter=Q(drift=True)),
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
        self.rates = [0, 0, 0, 0, 0, 0]
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
        names = ("rounds", "rejections", "early", "dedups", "timeouts", "drift")
        return Counters(
            **dict(zip(names, self.totals, strict=True)),
            **{f"rate_{name}": value for name, value in zip(names, self.rates, strict=True)},
        )


def tally_for(round_filter: RoundFilter, *, now: datetime | None = None) -> Tally:
    """A viewer's starting point: the filter's totals and its rounds of the last minute."""
    now = now or timezone.now()
    matching = round_filter.apply(Round.objects.all())
    if round_filter.tool:
        matching = Round.objects.filter(pk__in=matching.values("pk"))
    totals = _totals(matching)
    recent = {
        pk: (started, (1, rejections, early, dedups, timeouts, int(drift is True)))
        for pk, started, rejections, early, dedups, timeouts, drift in matching.filter(
            started_at__gte=now - RATE_WINDOW
        ).values_list(
            "pk", "started_at", "rejections", "early_starts", "dedups", "timeouts", "drift"
        )
    }
    sums = (
        totals["rounds"],
        totals["rejections"],
        totals["early"],
        totals["dedups"],
        totals["timeouts"],
        totals["drift"],
    )
    return Tally(round_filter, sums, recent)
