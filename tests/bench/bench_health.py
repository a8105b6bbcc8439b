"""Tool health figures for ``make bench`` (run from bench_observe's main, on its database):
ingest with and without the tallies in the same run, and the Tools view and the API over
100k rounds' tallies."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

#: Calls each seeded round carries at least (the target: ≥ 300k calls for 100k rounds).
CALLS_PER_ROUND = 3
#: In-process passes of each ingest variant (interleaved; the best of each is reported).
PASSES = 4
PASS_EVENTS = 20_000


def seed_tallies(count: int) -> int:
    """Tallies for ``count`` rounds started over the last two days (as ``seed_rounds`` spreads
    them), each made of simulated rounds' calls until it holds ``CALLS_PER_ROUND`` or more.
    Returns the calls seeded."""
    from core.timewindow import format_ts
    from observe.domain.health import bucket_of, merge_tally, round_tallies
    from observe.health.tallies import bucket_time, span_of
    from observe.models import Round, ToolHealthBucket

    per_template: list[dict[tuple[str, str], Counter[str]]] = []
    for row in Round.objects.filter(turn_id__startswith="b99-").only("agent", "assembly"):
        tools: dict[tuple[str, str], Counter[str]] = {}
        for (agent, tool, bucket), tally in round_tallies(row.agent, row.assembly).items():
            if len(bucket) == 16:  # the 5-minute tallies (the hourly ones repeat them)
                merge_tally(tools.setdefault((agent, tool), Counter()), tally)
        if tools:
            per_template.append(tools)
    start = datetime.now(UTC) - timedelta(days=2)
    span = timedelta(days=2) / count
    total: dict[tuple[str, str, str], Counter[str]] = {}
    calls = 0
    pick = 0
    for n in range(count):
        moment = format_ts(start + span * n)
        buckets = (bucket_of(moment), moment[:13])  # 5 minutes, the hour
        held = 0
        while held < CALLS_PER_ROUND:
            template = per_template[pick % len(per_template)]
            pick += 1
            for (agent, tool), tally in template.items():
                for bucket in buckets:
                    # Counts add, the exact max takes the larger (max_us).
                    merge_tally(total.setdefault((agent, tool, bucket), Counter()), tally)
                held += tally["calls"]
        calls += held
    ToolHealthBucket.objects.all().delete()
    ToolHealthBucket.objects.bulk_create(
        [
            ToolHealthBucket(
                agent=a, tool_id=t, span=span_of(b), bucket=bucket_time(b), tally=dict(tally)
            )
            for (a, t, b), tally in total.items()
        ],
        batch_size=2000,
    )
    return calls


def ingest_overhead(take_events: Any) -> dict[str, float]:
    """events/s of in-process ingest (batches of 1000) with the tallies and without them, the
    passes interleaved so both see the same machine."""
    import observe.services as services
    from observe.health.tallies import TallyChange
    from observe.services import events_ingest

    kept = services.tool_health_change
    now = datetime.now(UTC) - timedelta(days=1)

    def rate(seed: int) -> float:
        events = take_events(seed, PASS_EVENTS, now)
        batches = [events[i : i + 1000] for i in range(0, len(events), 1000)]
        begin = time.perf_counter()
        for batch in batches:
            events_ingest(batch)
        return len(events) / (time.perf_counter() - begin)

    spent = [0.0]
    kept_before = services.slots_before

    def timed(call: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            begin = time.perf_counter()
            found = call(*args, **kwargs)
            spent[0] += time.perf_counter() - begin
            return found

        return run

    def timed_change(**kwargs: Any) -> TallyChange:
        change = timed(kept)(**kwargs)
        change.write = timed(change.write)  # type: ignore[method-assign]
        return change

    with_tallies, without, shares = [], [], []
    try:
        for n in range(PASSES):
            # Alternate which goes first: the machine's other work hits both alike.
            for variant in ("with", "without") if n % 2 == 0 else ("without", "with"):
                seed = 300 + 2 * n + (variant == "without")
                if variant == "with":
                    spent[0] = 0.0
                    services.tool_health_change = timed_change
                    services.slots_before = timed(kept_before)
                    begin = time.perf_counter()
                    with_tallies.append(rate(seed))
                    shares.append(spent[0] / (time.perf_counter() - begin))
                else:
                    services.tool_health_change = lambda **_: TallyChange({}, {})
                    services.slots_before = kept_before
                    without.append(rate(seed))
    finally:
        services.tool_health_change = kept
        services.slots_before = kept_before
    best_with, best_without = max(with_tallies), max(without)
    return {
        "with_per_s": round(best_with),
        "without_per_s": round(best_without),
        "ratio": round(best_with / best_without, 3),
        # Robust to the machine's load: the share of ingest's own time spent on the tallies.
        "tally_share": round(min(shares), 3),
    }


def pages(client: Any, headers: dict[str, str], timed: Any) -> dict[str, float]:
    """Median ms of the Tools view and of the API (default window: the last 24 hours)."""
    for url in ("/live/tools/", "/api/v1/tools/health"):
        response = client.get(url, headers=headers if url.startswith("/api") else None)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
    return {
        "tools_view_ms": round(timed(lambda: client.get("/live/tools/")), 1),
        "api_ms": round(timed(lambda: client.get("/api/v1/tools/health", headers=headers)), 1),
        "api_7d_ms": round(
            timed(lambda: client.get("/api/v1/tools/health?since=7d", headers=headers)), 1
        ),
    }
