"""Tool health: what the rounds' tool calls say per tool, kept as mergeable tallies.

A **call** is one action slot (round, attempt, action_index) that finished or timed out; a slot
reported both ways counts once, as a timeout. Each slot of a round's assembly contributes a small
tally (counts and one histogram bin) to its tool's time bucket. Tallies are plain counters, so they
add and **subtract**: ingest adds what a batch's slots say now and subtracts what they said before,
which is why the aggregates equal a recompute from the stored events whatever the order, the
repeats or the batching (the assembly itself is order-independent).

Durations go into fixed bins: 1 ms wide below 100 ms, then log-scale bins 2 % wide. A bin reports
a value at most 1 % (or 1 ms) from any duration it holds, so a nearest-rank percentile read from
the bins is within max(1 %, 1 ms) of the exact one. A digest (t-digest, KLL) would be smaller but
cannot subtract, and a replaced ``tool.finished`` must be taken back out.

A timed-out call took at least its limit: it is counted at its own ``limit_ms`` (a censored
value, kept exactly per limit) in every percentile and in the max, and a figure that lands on
one says so. The slowest finished call is kept exactly per tally (``max_us``: a max of maxes
merges exactly); a delta carries each changed duration as ``x:<µs>`` so that taking the slowest
call back out is noticed (the store then reads the tally's max again from its rounds).

Over 500 lines on purpose: the tally, its bins and the advice read from them are one contract
(advice thresholds are stated in bins); split, a change to the bins would miss a reader.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.vocabulary import (
    ACTION_ACCEPTED,
    ACTION_OBSERVED,
    ACTION_REJECTED,
    KINDS,
    LEDGER_DEDUP,
    TOOL_EARLY_STARTED,
    TOOL_FINISHED,
    TOOL_TIMEOUT,
)
from observe.domain.events import Event
from observe.domain.rounds import Assembly, Slot

#: Bucket width of the kept tallies, in minutes (a window's last quarter needs a few of them
#: even in the last hour).
BUCKET_MINUTES: Final = 5
#: Below this, bins are 1 ms wide (1 % of a duration is less than 1 ms there).
LINEAR_MS: Final = 100
#: Width ratio of the log-scale bins: any value of a bin is within 1 % of the reported one.
RATIO: Final = 1.02
_LOG_RATIO: Final = math.log(RATIO)
#: The reported point of a log bin, as a share of its lower edge: 1.00995 keeps both the lower
#: edge and the upper edge (x 1.02) strictly within 1 % of it.
_POINT: Final = 1.00995
#: A timeout whose elapsed time is at least this share of its limit ran into the limit.
AT_LIMIT_SHARE: Final = 0.9

# Tally keys (a tally maps these to counts; ``h:<bin>`` and ``r:<code>`` are per bin / code).
# A kind's tally key is its round counter's name: a tool's timeouts and a round's are one word.
CALLS, FINISHED, ERRORS = "calls", "finished", "errors"
TIMEOUTS, EARLY, DEDUPS = (KINDS[name].counter for name in ("timeout", "early", "dedup"))
AT_LIMIT, LIMIT_MS = "at_limit", "limit_ms"
EARLY_DROPPED = "early_dropped"
BIN, REJECTION = "h:", "r:"
#: Timeouts per limit (``c:<limit_ms>``): censored durations, each at least its whole limit.
CENSORED: Final = "c:"
#: The slowest finished call of a tally, in whole microseconds (merged by max, not added).
MAX_US: Final = "max_us"
#: In a delta only: one finished duration (``x:<µs>``) added (+1) or taken back (-1).
EXACT: Final = "x:"

#: (agent, tool_id, bucket: "YYYY-MM-DDTHH:MM" for 5 minutes, "YYYY-MM-DDTHH" for an hour)
TallyKey = tuple[str, str, str]


def duration_bin(ms: float) -> int:
    """The bin of a duration: ``0..99`` the whole milliseconds below 100 ms, then one bin per
    2 % step."""
    if ms < LINEAR_MS:
        return max(0, int(ms))
    return LINEAR_MS + int(math.log(ms / LINEAR_MS) / _LOG_RATIO)


def bin_value(index: int) -> float:
    """The duration a bin reports (ms): its lower edge below 100 ms, else just above it.

    Not rounded: the point is only 0.005 % inside the 1 % bound at a bin's upper edge, so
    rounding it to 0.1 ms carried a duration at the edge past the bound (140 ms read as 138.6).
    """
    if index < LINEAR_MS:
        return float(index)
    return LINEAR_MS * RATIO ** (index - LINEAR_MS) * _POINT


def micros(ms: float) -> int:
    """A duration in whole microseconds (how the exact max is kept: tallies hold integers)."""
    return round(ms * 1000)


def bucket_of(ts: str) -> str:
    """The bucket a stored time (``YYYY-MM-DDTHH:MM:SS.mmmZ``) falls in, as ``YYYY-MM-DDTHH:MM``."""
    minute = int(ts[14:16]) // BUCKET_MINUTES * BUCKET_MINUTES
    return f"{ts[:14]}{minute:02d}"


def hour_of(ts: str) -> str:
    """The hour a stored time falls in, as ``YYYY-MM-DDTHH`` (the name of an hourly tally:
    each count is kept per 5 minutes and per hour, so a long window reads a twelfth of the
    rows)."""
    return ts[:13]


#: One count of one tally: (agent, tool_id, bucket, name).
FlatKey = tuple[str, str, str, str]


def slot_counts(agent: str, slot: Slot, out: dict[FlatKey, int], sign: int) -> None:
    """Add (``sign`` 1) or take back (-1) what one action slot of an assembly contributes, into
    ``out`` by (agent, tool, bucket, name).

    Each count lands in the bucket of the event that decides it: a call at its timeout (or, when
    it did not time out, its finish), a rejection at the rejection, an early start at the start.
    """
    observed = slot.get(ACTION_OBSERVED)
    if observed is not None:
        tool_id = observed[3]
    else:
        tool = slot.get("tool")
        tool_id = tool[2] if tool is not None else None
    if not isinstance(tool_id, str):
        return
    get = out.get

    def add(ts: str, name: str, amount: int = 1) -> None:
        key = (agent, tool_id, bucket_of(ts), name)
        out[key] = get(key, 0) + sign * amount
        key = (agent, tool_id, ts[:13], name)
        out[key] = get(key, 0) + sign * amount

    timeout = slot.get(TOOL_TIMEOUT)
    if timeout is not None:
        # [ts, id, tool_call_id, limit_ms, elapsed_ms, async_alternative]
        ts, limit, elapsed = timeout[0], timeout[3], timeout[4]
        add(ts, CALLS)
        add(ts, TIMEOUTS)
        if isinstance(limit, int | float) and math.isfinite(limit) and limit > 0:
            add(ts, LIMIT_MS, round(limit))
            add(ts, f"{CENSORED}{round(limit)}")
            if isinstance(elapsed, int | float) and elapsed >= AT_LIMIT_SHARE * limit:
                add(ts, AT_LIMIT)
    else:
        finished = slot.get(TOOL_FINISHED)
        if finished is not None:
            # [ts, id, tool_call_id, status, duration_ms]
            ts, duration = finished[0], finished[4]
            add(ts, CALLS)
            add(ts, FINISHED)
            if finished[3] == "error":
                add(ts, ERRORS)
            if isinstance(duration, int | float) and math.isfinite(duration):
                add(ts, f"{BIN}{duration_bin(duration)}")
                add(ts, f"{EXACT}{micros(duration)}")
    rejected = slot.get(ACTION_REJECTED)
    dropped = False
    if rejected is not None:
        accepted = slot.get(ACTION_ACCEPTED)
        dropped = accepted is None or (rejected[0], rejected[1]) > (accepted[0], accepted[1])
        if dropped:
            add(rejected[0], f"{REJECTION}{rejected[2]}")
    early = slot.get(TOOL_EARLY_STARTED)
    if early is not None:
        add(early[0], EARLY)
        if dropped:
            add(early[0], EARLY_DROPPED)
    dedup = slot.get(LEDGER_DEDUP)
    if dedup is not None:
        add(dedup[0], DEDUPS)


def grouped(flat: Mapping[FlatKey, int]) -> dict[TallyKey, dict[str, int]]:
    """Flat counts as tallies by (agent, tool, bucket), zero counts left out (the stored form)."""
    found: dict[TallyKey, dict[str, int]] = {}
    for (agent, tool_id, bucket, name), amount in flat.items():
        if amount:
            found.setdefault((agent, tool_id, bucket), {})[name] = amount
    return found


def settled(tally: Mapping[str, int]) -> dict[str, int]:
    """A tally of added slots as it is stored: its ``x:<µs>`` durations folded into ``max_us``
    (the recompute's form; ingest folds deltas into stored rows itself)."""
    found: dict[str, int] = {}
    slowest: int | None = None
    for name, amount in tally.items():
        if name.startswith(EXACT):
            if amount > 0:
                value = int(name[len(EXACT) :])
                slowest = value if slowest is None else max(slowest, value)
        elif amount:
            found[name] = amount
    if slowest is not None:
        found[MAX_US] = slowest
    return found


def nonzero(tally: Mapping[str, int]) -> dict[str, int]:
    """The tally without its zero counts (the stored form)."""
    return {name: amount for name, amount in tally.items() if amount}


@dataclass(frozen=True)
class Before:
    """The slots a batch is about to change, copied as they are now (``touched``: every slot key
    the batch names, new ones included)."""

    slots: Mapping[str, Slot]
    touched: frozenset[str]


def slots_before(state: Assembly, events: Iterable[Event]) -> Before:
    """Take :class:`Before` ahead of a merge. Merging replaces a slot's marks in place and every
    mark is a new list, so a shallow copy of each slot keeps the old marks."""
    slots = state["slots"]
    pairs = set()
    for event in events:
        index = event.data.get("action_index")
        if index.__class__ is int:
            pairs.add((event.attempt, index))
    touched = frozenset(f"{attempt}:{index}" for attempt, index in pairs)
    return Before({key: dict(slots[key]) for key in touched if key in slots}, touched)


def round_change(agent: str, before: Before, state: Assembly, out: dict[FlatKey, int]) -> None:
    """Add to ``out`` what a merge changed: the touched slots now minus the same slots before."""
    slots = state["slots"]
    for old in before.slots.values():
        slot_counts(agent, old, out, -1)
    for key in before.touched:
        slot = slots.get(key)
        if slot is not None:
            slot_counts(agent, slot, out, 1)


def round_tallies(agent: str, state: Assembly) -> dict[TallyKey, dict[str, int]]:
    """Every slot's tallies of one round (the recompute)."""
    flat: dict[FlatKey, int] = {}
    for slot in state["slots"].values():
        slot_counts(agent, slot, flat, 1)
    return {key: settled(tally) for key, tally in grouped(flat).items()}


# --- reading tallies back ------------------------------------------------------------------


def percentile(bins: Mapping[int, int], p: float) -> float | None:
    """Nearest-rank percentile (the value at rank ceil(p*n)) from binned counts."""
    found = reading(bins, {}, p)
    return found.ms if found is not None else None


#: What a figure is: read from a bin (within max(1 %, 1 ms)), a timed-out call counted at its
#: limit (the call took at least that long), or the exact slowest finished call.
ESTIMATE, LIMIT, EXACT_FIGURE = "estimate", "limit", "exact"


@dataclass(frozen=True)
class Reading:
    """A figure in ms and what it is (:data:`ESTIMATE`, :data:`LIMIT` or :data:`EXACT_FIGURE`)."""

    ms: float
    kind: str


def reading(bins: Mapping[int, int], censored: Mapping[int, int], p: float) -> Reading | None:
    """Nearest-rank percentile over the finished calls' bins and the timed-out calls, each of
    those counted at its own limit (``censored``: limit ms → timeouts). Within a bin, finished
    calls rank before timed-out ones (a timed-out call took at least its limit)."""
    items = [(index, 0, count, bin_value(index)) for index, count in bins.items() if count > 0]
    items += [
        (duration_bin(limit), 1, count, float(limit))
        for limit, count in censored.items()
        if count > 0
    ]
    n = sum(item[2] for item in items)
    if n <= 0:
        return None
    rank = max(1, math.ceil(p * n))
    seen = 0
    items.sort()
    for _, kind, count, value in items:
        seen += count
        if seen >= rank:
            return Reading(value, LIMIT if kind else ESTIMATE)
    _, kind, _, value = items[-1]
    return Reading(value, LIMIT if kind else ESTIMATE)


def calls_over(bins: Mapping[int, int], limit_ms: float) -> int:
    """How many binned durations ran longer than ``limit_ms`` (read from the bins, so within
    the bins' 1 % of the limit)."""
    return sum(count for index, count in bins.items() if bin_value(index) > limit_ms)


def exact_percentile(values: Iterable[float], p: float) -> float | None:
    """The exact nearest-rank percentile (for tests and the docs' definition)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p * len(ordered))) - 1]


def merge_tally(into: dict[str, int], tally: Mapping[str, int]) -> None:
    """Add a stored tally into ``into``: counts add, ``max_us`` takes the larger."""
    get = into.get
    for name, amount in tally.items():
        if name == MAX_US:
            held = get(MAX_US)
            into[MAX_US] = amount if held is None else max(held, amount)
        else:
            into[name] = get(name, 0) + amount


#: The figures of a summary that are read from the calls' durations.
FIGURES: Final = ("p50_ms", "p95_ms", "p99_ms", "max_ms")


@dataclass
class ToolStats:
    """One tool's tallies summed over a window (or part of one)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, tally: Mapping[str, int]) -> None:
        merge_tally(self.counts, tally)

    @property
    def bins(self) -> dict[int, int]:
        # Only bin names start with "h" (``h:<bin>``).
        return {
            int(name[2:]): amount
            for name, amount in self.counts.items()
            if name[0] == "h" and amount > 0
        }

    @property
    def censored(self) -> dict[int, int]:
        """Timeouts per limit (ms)."""
        return {
            int(name[len(CENSORED) :]): amount
            for name, amount in self.counts.items()
            if name.startswith(CENSORED) and amount > 0
        }

    @property
    def rejections(self) -> dict[str, int]:
        return {
            name[len(REJECTION) :]: amount
            for name, amount in sorted(self.counts.items())
            if name.startswith(REJECTION) and amount > 0
        }

    def __getitem__(self, name: str) -> int:
        return self.counts[name]

    @property
    def timeout_rate(self) -> float | None:
        calls = self.counts[CALLS]
        return self.counts[TIMEOUTS] / calls if calls else None

    def read(self, p: float) -> Reading | None:
        """A percentile with the timed-out calls at their limits."""
        return reading(self.bins, self.censored, p)

    def slowest(self) -> Reading | None:
        """The max: the exact slowest finished call, or a timed-out call's limit when that is
        as long (a bin estimate only for a tally kept before the exact max was)."""
        censored = self.censored
        limit = float(max(censored)) if censored else None
        kept = self.counts.get(MAX_US)
        if kept is not None and self.counts[FINISHED] > 0:
            finished: Reading | None = Reading(kept / 1000, EXACT_FIGURE)
        else:
            finished = reading(self.bins, {}, 1.0)
        if limit is not None and (finished is None or limit >= finished.ms):
            return Reading(limit, LIMIT)
        return finished

    def figures(self) -> dict[str, Reading | None]:
        """The percentiles and the max. A bin estimate is capped at the exact max: a bin
        reports a point up to 1 % above the durations it holds, and a p99 of "512 ms" beside a
        max of "511 ms" reads as a bug (a censored figure is left as it is)."""
        top = self.slowest()
        found: dict[str, Reading | None] = {}
        for name, p in (("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99)):
            figure = self.read(p)
            if (
                figure is not None
                and figure.kind == ESTIMATE
                and top is not None
                and top.kind == EXACT_FIGURE
                and figure.ms > top.ms
            ):
                figure = Reading(top.ms, ESTIMATE)
            found[name] = figure
        found["max_ms"] = top
        return found

    def summary(self) -> dict[str, Any]:
        """The numbers of the API's tool object (in ms, null without calls; ``figures`` says
        of each whether it is a bin estimate, a timed-out call's limit or exact)."""
        calls, dedups = self.counts[CALLS], self.counts[DEDUPS]
        rate = self.timeout_rate
        figures = self.figures()
        return {
            "calls": calls,
            **{
                name: round(found.ms, 3) if found is not None else None
                for name, found in figures.items()
            },
            "figures": {name: found.kind for name, found in figures.items() if found is not None},
            "timeouts": self.counts[TIMEOUTS],
            "timeout_rate": round(rate, 4) if rate is not None else None,
            "errors": self.counts[ERRORS],
            "rejections": self.rejections,
            "early_starts": self.counts[EARLY],
            "dedups": dedups,
            # The share of calls the ledger saved: of the calls the model asked for (made ones
            # plus deduplicated ones), how many were served by an earlier call.
            "dedup_share": round(dedups / (calls + dedups), 4) if calls + dedups else None,
        }


# --- advice ----------------------------------------------------------------------------------

#: Headroom over the observed p99 when a timeout is suggested.
HEADROOM: Final = 1.5
#: A rising timeout rate must be this unlikely under "no change" (one-sided).
RISING_P: Final = 0.01
#: Of the timeouts, this share at the limit makes the limit "too tight".
CLUSTERED_SHARE: Final = 0.8
#: Of the early executions, more than this share dropped or deduplicated away is "ineffective".
INEFFECTIVE_SHARE: Final = 0.5
#: The seed's bound on a synchronous call (s): a suggestion past it is an async job instead.
SYNC_CAP_S: Final = 30


@dataclass(frozen=True)
class Thresholds:
    min_calls: int = 20
    timeout_rate: float = 0.05
    async_p95_s: float = 10.0


@dataclass(frozen=True)
class ToolDesign:
    """What the policy says of a tool that the rules read (from its effective traits and its
    execution design)."""

    timeout_s: float | None = None
    mode: str = "sync"
    retry: str | None = None
    confirm: bool = False
    async_alternative: str | None = None
    exploitation: bool = False
    early: bool = False


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def rising_p_value(late_hits: int, late_n: int, rest_hits: int, rest_n: int) -> float:
    """One-sided Fisher exact test: the chance of at least ``late_hits`` of all the timeouts
    landing among the late calls if both parts had the same rate (the hypergeometric tail; exact
    for any count, so small samples are judged fairly)."""
    total, hits = late_n + rest_n, late_hits + rest_hits
    if late_n <= 0 or rest_n <= 0 or hits <= 0:
        return 1.0
    base = _log_comb(total, hits)
    tail = 0.0
    for x in range(late_hits, min(hits, late_n) + 1):
        if hits - x > rest_n:
            continue
        tail += math.exp(_log_comb(late_n, x) + _log_comb(rest_n, hits - x) - base)
    return min(1.0, tail)


def rate_text(share: float) -> str:
    """A rate as every page and advice writes it: a percentage to one decimal, a trailing
    ``.0`` dropped (4 of 60 → ``6.7 %``, 3 of 60 → ``5 %``)."""
    return f"{share * 100:.1f}".removesuffix(".0") + " %"


#: The short form of each advice (the Tools table shows it; the whole sentence is ``message``).
SUMMARIES: Final = {
    "timeout-suggested": "No timeout set: one is suggested from the p99",
    "timeout-too-tight": "Timeout too tight: calls are cut off at the limit",
    "async-candidate": "Slow for a synchronous tool: make it an async job",
    "early-ineffective": "Early start rarely pays off here",
    "retry-risk": "A timed-out call may be applied twice on retry",
}


def _seconds(ms: float) -> float:
    """A suggested time limit: seconds, rounded up to a whole second (at least 1)."""
    return float(max(1, math.ceil(ms / 1000)))


def advise(
    stats: ToolStats,
    late: ToolStats,
    design: ToolDesign,
    thresholds: Thresholds = Thresholds(),
) -> list[dict[str, Any]]:
    """The advice the calls support, each ``{"code", "message", "evidence"}``. ``late``: the
    window's last quarter (the rest is ``stats`` minus it). ``evidence["suggested"]``, when
    present, is the edit the tool editor opens with (never applied here)."""
    advice: list[dict[str, Any]] = []
    calls, finished, timeouts = stats[CALLS], stats[FINISHED], stats[TIMEOUTS]
    bins = stats.bins
    p99 = percentile(bins, 0.99)
    rate = stats.timeout_rate
    enough = calls >= thresholds.min_calls

    if design.timeout_s is None and finished >= thresholds.min_calls and p99 is not None:
        value = _seconds(p99 * HEADROOM)
        advice.append(
            {
                "code": "timeout-suggested",
                "message": (
                    f"No timeout_s is set. {finished} finished calls have a p99 of"
                    f" {p99:g} ms; with {HEADROOM:g}x headroom, set timeout_s to {value:g}."
                ),
                "evidence": {
                    "calls": finished,
                    "p99_ms": p99,
                    "headroom": HEADROOM,
                    "suggested": {"timeout_s": value},
                },
            }
        )

    at_limit = stats[AT_LIMIT]
    if (
        enough
        and rate is not None
        and rate > thresholds.timeout_rate
        and timeouts
        and at_limit / timeouts >= CLUSTERED_SHARE
    ):
        limit_ms = stats[LIMIT_MS] / timeouts
        value = _seconds(limit_ms * 2)
        evidence: dict[str, Any] = {
            "calls": calls,
            "timeouts": timeouts,
            "timeout_rate": round(rate, 4),
            "at_limit": at_limit,
            "mean_limit_ms": round(limit_ms, 1),
        }
        if design.mode != "sync" or value <= SYNC_CAP_S:
            evidence["suggested"] = {"timeout_s": value}
        # Each remedy is offered only when the design does not have it already: an async job
        # is not told to become one.
        remedy = " Raise timeout_s" + (f" to {value:g}" if "suggested" in evidence else "")
        remedy += ", or make the tool an async job." if design.mode == "sync" else "."
        advice.append(
            {
                "code": "timeout-too-tight",
                "message": (
                    f"{timeouts} of {calls} calls timed out ({rate_text(rate)}, above"
                    f" {rate_text(thresholds.timeout_rate)}), {at_limit} of them at the limit of"
                    f" about {limit_ms / 1000:g} s: the limit cuts off calls that were still"
                    " working." + remedy
                ),
                "evidence": evidence,
            }
        )

    if design.mode == "sync":
        reasons: list[str] = []
        evidence = {"calls": calls}
        # The p95 with the timed-out calls at their limits: a tool that times out often is
        # slow, not fast.
        seen = stats.read(0.95)
        slow = seen is not None and seen.ms > thresholds.async_p95_s * 1000
        if enough and seen is not None and slow:
            bound = "at least " if seen.kind == LIMIT else ""
            reasons.append(
                f"has a p95 of {bound}{seen.ms / 1000:g} s (over the"
                f" {thresholds.async_p95_s:g} s threshold)"
            )
            evidence["p95_ms"] = round(seen.ms, 3)
        rest_calls, rest_timeouts = calls - late[CALLS], timeouts - late[TIMEOUTS]
        if enough:
            p_value = rising_p_value(late[TIMEOUTS], late[CALLS], rest_timeouts, rest_calls)
            if p_value < RISING_P:
                reasons.append(
                    f"saw its timeout rate rise from {rest_timeouts} of {rest_calls} calls to"
                    f" {late[TIMEOUTS]} of {late[CALLS]} in the window's last quarter"
                    f" (one-sided Fisher exact test, p = {p_value:.2g})"
                )
                evidence.update(
                    late_calls=late[CALLS],
                    late_timeouts=late[TIMEOUTS],
                    earlier_calls=rest_calls,
                    earlier_timeouts=rest_timeouts,
                    p_value=float(f"{p_value:.3g}"),
                )
        if reasons:
            target = (
                f"; callers can use {design.async_alternative} instead"
                if design.async_alternative
                else "; start the job, return its id, and poll a status tool"
            )
            evidence["suggested"] = {"mode": "async_job"}
            advice.append(
                {
                    "code": "async-candidate",
                    "message": (
                        "This synchronous tool "
                        + " and ".join(reasons)
                        + f": convert it to an async job (the Async Job pattern){target}."
                    ),
                    "evidence": evidence,
                }
            )

    early_runs = stats[EARLY] + stats[DEDUPS]
    if design.early and early_runs >= thresholds.min_calls:
        wasted = stats[EARLY_DROPPED] + stats[DEDUPS]
        if wasted / early_runs > INEFFECTIVE_SHARE:
            advice.append(
                {
                    "code": "early-ineffective",
                    "message": (
                        f"{wasted} of {early_runs} early executions were dropped (the action"
                        " was rejected) or deduplicated away: starting early rarely saves"
                        " time here. Consider turning early start off."
                    ),
                    "evidence": {
                        "calls": early_runs,
                        "early_starts": stats[EARLY],
                        "dropped": stats[EARLY_DROPPED],
                        "dedups": stats[DEDUPS],
                        "suggested": {"early": False},
                    },
                }
            )

    if (
        design.exploitation
        and timeouts
        and enough
        and design.retry not in ("natural_key", "idempotency_key", "dedup")
        and not design.confirm
    ):
        advice.append(
            {
                "code": "retry-risk",
                "message": (
                    f"An exploitation tool timed out {timeouts} times in {calls} calls and has"
                    " no retry story (exploitation-unsafe-retry): a caller that retries after a"
                    " timeout may apply the change twice. Give it an idempotency key, or a"
                    " confirmation gate."
                ),
                "evidence": {
                    "calls": calls,
                    "timeouts": timeouts,
                    "diagnostic": "exploitation-unsafe-retry",
                    "suggested": {"retry": "idempotency_key"},
                },
            }
        )
    for item in advice:
        item["summary"] = SUMMARIES[item["code"]]
    return advice


def quiet(stats: ToolStats, thresholds: Thresholds = Thresholds()) -> dict[str, Any] | None:
    """Why a tool with calls has no advice when the reason is its sample: fewer calls than
    advice needs (``needed``). ``watch`` is set when those few calls already time out more
    often than the threshold ("watch: 3 of 5 calls timed out")."""
    calls, timeouts = stats[CALLS], stats[TIMEOUTS]
    if not calls or calls >= thresholds.min_calls:
        return None
    found: dict[str, Any] = {
        "calls": calls,
        "needed": thresholds.min_calls,
        "message": f"{calls} of {thresholds.min_calls} calls needed before advice",
        "watch": None,
    }
    if timeouts / calls > thresholds.timeout_rate:
        found["watch"] = f"watch: {timeouts} of {calls} calls timed out"
    return found
