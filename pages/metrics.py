"""``GET /api/v1/metrics``: Traitdeck's figures in the Prometheus text format (runtime token
scope ``metrics:read``), for the Prometheus an operator already runs beside KDCube.

Every figure is **read from the database at scrape time** (a custom ``prometheus_client``
collector), not counted in process memory: several workers (and containers on several hosts)
answer the same numbers whichever one Prometheus reaches, nothing is lost on a restart, and the
bridge (another process) reports through the database anyway. prometheus-client's multiprocess
mode was the other way; it needs one directory shared by every worker of a host, loses counts
on a host's restart, and cannot see the rounds that other hosts' workers ingested.

Counters come from what ingest keeps: rounds by agent and outcome (the finished rounds), tool
calls, rejections, early starts, dedups, timeouts and the duration histogram from the tool-health
tallies (``observe.health``), events by what became of them (``observe.models.IngestCount``).
``prune_rounds`` takes pruned rounds back out of the tallies, so a prune lowers those counters:
Prometheus reads a lower value as a counter reset, which ``rate()`` and ``increase()`` handle.

Cardinality is bounded: per agent, the :func:`tool_cap` tools with the most actions keep their
own series; the rest are summed under ``tool="other"`` (as are agents beyond :func:`agent_cap`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Router
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from accounts.auth import RuntimeTokenAuth
from kdcube.bridge.models import BridgeStatus
from kdcube.services import config_drift, push_status
from observe.domain.health import (
    BIN,
    CALLS,
    DEDUPS,
    EARLY,
    LINEAR_MS,
    RATIO,
    REJECTION,
    TIMEOUTS,
    bin_value,
)
from observe.models import IngestCount, Round, ToolHealthBucket
from observe.store import INGEST_RESULTS
from policy.versions import version_published

router = Router(tags=["metrics"])

#: Upper bounds (seconds) of the duration histogram's buckets: 18 of them (and +Inf) over the
#: tool-health bins' range, from 5 ms to half an hour.
DURATION_BOUNDS_S: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
)
OTHER: Final = "other"
#: Gauge values of ``traitdeck_kdcube_push`` (one series per status, 1 for the newest push of
#: the version in force): ``none`` when that version was never pushed.
PUSH_STATUSES: Final = ("pushed", "failed", "refused", "none")


def tool_cap() -> int:
    """Tools per agent with series of their own (``TRAITDECK_METRICS_MAX_TOOLS``, default 50)."""
    return int(settings.TRAITDECK_METRICS_MAX_TOOLS)


def agent_cap() -> int:
    """Agents with series of their own (``TRAITDECK_METRICS_MAX_AGENTS``, default 100)."""
    return int(settings.TRAITDECK_METRICS_MAX_AGENTS)


def kept(weights: Mapping[str, int], cap: int) -> frozenset[str]:
    """The ``cap`` names of most weight (ties by name): the others fold into ``other``."""
    ranked = sorted(weights, key=lambda name: (-weights[name], name))
    return frozenset(ranked[:cap])


def bin_upper_ms(index: int) -> float:
    """The upper edge of a tool-health bin (every duration in it is below this)."""
    if index < LINEAR_MS:
        return float(index + 1)
    return LINEAR_MS * RATIO ** (index - LINEAR_MS + 1)


def bucket_index(index: int) -> int:
    """The histogram bucket a bin's calls count in: the first bound the whole bin lies under
    (``len(DURATION_BOUNDS_S)``: only +Inf)."""
    upper_s = bin_upper_ms(index) / 1000
    for position, bound in enumerate(DURATION_BOUNDS_S):
        if upper_s <= bound * (1 + 1e-9):
            return position
    return len(DURATION_BOUNDS_S)


class ToolTotals:
    """One (agent, tool)'s all-time tally: the hourly tallies added up."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, tally: Mapping[str, Any]) -> None:
        for name, amount in tally.items():
            if isinstance(amount, int):
                self.counts[name] += amount

    def actions(self) -> int:
        c = self.counts
        rejected = sum(v for k, v in c.items() if k.startswith(REJECTION))
        return c[CALLS] + rejected + c[EARLY] + c[DEDUPS]


def tool_totals() -> dict[tuple[str, str], ToolTotals]:
    """Every (agent, tool_id)'s totals over the kept hourly tallies, tools folded by the caps."""
    raw: dict[tuple[str, str], ToolTotals] = defaultdict(ToolTotals)
    rows = ToolHealthBucket.objects.filter(span=60).values_list("agent", "tool_id", "tally")
    for agent, tool_id, tally in rows.iterator(chunk_size=2000):
        raw[(agent, tool_id)].add(tally)
    agent_weight: dict[str, int] = defaultdict(int)
    tool_weight: dict[str, dict[str, int]] = defaultdict(dict)
    for (agent, tool_id), totals in raw.items():
        n = totals.actions()
        agent_weight[agent] += n
        tool_weight[agent][tool_id] = n
    agents = kept(agent_weight, agent_cap())
    folded: dict[tuple[str, str], ToolTotals] = defaultdict(ToolTotals)
    for agent, tools in tool_weight.items():
        own = kept(tools, tool_cap()) if agent in agents else frozenset()
        for tool_id in tools:
            key = (agent if agent in agents else OTHER, tool_id if tool_id in own else OTHER)
            folded[key].add(raw[(agent, tool_id)].counts)
    return folded


def _tool_families(totals: Mapping[tuple[str, str], ToolTotals]) -> Iterator[Metric]:
    actions = CounterMetricFamily(
        "traitdeck_actions",
        "Actions by agent, tool and disposition: accepted (calls that ran: finished or timed"
        " out), rejected (label code: the rejection code), early (started early), dedup (served"
        " by an earlier call).",
        labels=["agent", "tool", "disposition", "code"],
    )
    timeouts = CounterMetricFamily(
        "traitdeck_tool_timeouts", "Tool calls that timed out.", labels=["agent", "tool"]
    )
    durations = HistogramMetricFamily(
        "traitdeck_tool_call_duration_seconds",
        "Durations of finished tool calls (timed-out calls are counted as timeouts instead).",
        labels=["agent", "tool"],
    )
    for (agent, tool), t in sorted(totals.items()):
        c = t.counts
        actions.add_metric([agent, tool, "accepted", ""], c[CALLS])
        actions.add_metric([agent, tool, "early", ""], c[EARLY])
        actions.add_metric([agent, tool, "dedup", ""], c[DEDUPS])
        for name in sorted(c):
            if name.startswith(REJECTION):
                actions.add_metric([agent, tool, "rejected", name[len(REJECTION) :]], c[name])
        timeouts.add_metric([agent, tool], c[TIMEOUTS])
        per_bucket = [0] * (len(DURATION_BOUNDS_S) + 1)
        total_ms = 0.0
        for name, amount in c.items():
            if name.startswith(BIN) and amount > 0:
                index = int(name[len(BIN) :])
                per_bucket[bucket_index(index)] += amount
                total_ms += bin_value(index) * amount
        running = 0
        buckets: list[tuple[str, float]] = []
        for bound, n in zip((*DURATION_BOUNDS_S, math.inf), per_bucket, strict=True):
            running += n
            buckets.append(("+Inf" if bound == math.inf else repr(bound), running))
        durations.add_metric([agent, tool], buckets, total_ms / 1000)
    yield actions
    yield timeouts
    yield durations


def _round_family() -> Iterator[Metric]:
    rounds = CounterMetricFamily(
        "traitdeck_rounds", "Finished rounds by agent and outcome.", labels=["agent", "outcome"]
    )
    open_rounds = GaugeMetricFamily(
        "traitdeck_rounds_open", "Rounds started and not finished yet.", labels=["agent"]
    )
    rows = list(Round.objects.values_list("agent", "outcome").annotate(n=Count("id")))
    weight: dict[str, int] = defaultdict(int)
    for agent, _outcome, n in rows:
        weight[agent] += n
    agents = kept(weight, agent_cap())
    finished: dict[tuple[str, str], int] = defaultdict(int)
    still_open: dict[str, int] = defaultdict(int)
    for agent, outcome, n in rows:
        name = agent if agent in agents else OTHER
        if outcome is None:
            still_open[name] += n
        else:
            finished[(name, outcome)] += n
    for (agent, outcome), n in sorted(finished.items()):
        rounds.add_metric([agent, outcome], n)
    for agent, n in sorted(still_open.items()):
        open_rounds.add_metric([agent], n)
    yield rounds
    yield open_rounds


def _ingest_family() -> Iterator[Metric]:
    family = CounterMetricFamily(
        "traitdeck_ingest_events",
        "Events posted to POST /api/v1/events by result: accepted (stored), duplicate (a repeat"
        " of a stored event), refused (reported by index; a batch refused whole is not counted).",
        labels=["result"],
    )
    stored = dict(IngestCount.objects.values_list("name", "value"))
    for name in INGEST_RESULTS:
        family.add_metric([name], stored.get(name, 0))
    yield family


def _bridge_families() -> Iterator[Metric]:
    buffered = GaugeMetricFamily(
        "traitdeck_bridge_buffered_events",
        "Events a KDCube bridge held (not yet stored) at its last report.",
        labels=["bridge"],
    )
    dropped = CounterMetricFamily(
        "traitdeck_bridge_dropped_rounds",
        "Rounds a bridge dropped whole because its buffer was full (since the bridge started).",
        labels=["bridge"],
    )
    age = GaugeMetricFamily(
        "traitdeck_bridge_report_age_seconds",
        "Seconds since a bridge last reported (it reports every few seconds while it runs).",
        labels=["bridge"],
    )
    now = timezone.now()
    for row in BridgeStatus.objects.order_by("name")[:100]:
        counts = row.counts if isinstance(row.counts, dict) else {}
        buffered.add_metric([row.name], int(counts.get("buffered", 0)))
        dropped.add_metric([row.name], int(counts.get("dropped_rounds", 0)))
        age.add_metric([row.name], max(0.0, (now - row.reported_at).total_seconds()))
    yield buffered
    yield dropped
    yield age


def _policy_families() -> Iterator[Metric]:
    in_force = version_published()
    version = GaugeMetricFamily(
        "traitdeck_policy_version",
        "The number of the policy version in force (0: none published yet).",
    )
    version.add_metric([], in_force.number if in_force is not None else 0)
    yield version
    push = GaugeMetricFamily(
        "traitdeck_kdcube_push",
        "1 for the status of the newest KDCube push of the version in force (none: never"
        " pushed); 0 for the other statuses.",
        labels=["status"],
    )
    status = "none"
    if in_force is not None:
        newest = push_status([in_force.number]).get(in_force.number)
        status = newest.status if newest is not None else "none"
    for name in PUSH_STATUSES:
        push.add_metric([name], 1 if name == status else 0)
    yield push
    drift = GaugeMetricFamily(
        "traitdeck_kdcube_config_drift",
        "Keys of KDCube's props that differ from the version in force at the last read (0: none).",
    )
    row = config_drift()
    drift.add_metric([], len(row.differs) if row is not None else 0)
    yield drift


class TraitdeckCollector(Collector):
    """Every family, read from the database when Prometheus scrapes."""

    def collect(self) -> Iterable[Metric]:
        yield from _round_family()
        yield from _tool_families(tool_totals())
        yield from _ingest_family()
        yield from _bridge_families()
        yield from _policy_families()


def metrics_text() -> bytes:
    """The exposition (a registry of its own: no process or platform collectors, whose values
    would differ between workers)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TraitdeckCollector())
    return generate_latest(registry)


@router.get(
    "/metrics",
    auth=RuntimeTokenAuth("metrics:read"),
    response={200: str},
    openapi_extra={
        "responses": {200: {"description": "Prometheus text format", "content": {"text/plain": {}}}}
    },
)
def metrics(request: HttpRequest) -> HttpResponse:
    """Traitdeck's metrics in the Prometheus text format (docs/production.md lists them)."""
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
