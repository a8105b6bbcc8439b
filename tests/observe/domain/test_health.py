"""Tool health in the domain: histogram percentiles, the rising-rate test, the advice rules."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from observe.domain import health
from observe.domain.health import (
    AT_LIMIT,
    BIN,
    CALLS,
    DEDUPS,
    EARLY,
    EARLY_DROPPED,
    FINISHED,
    LIMIT_MS,
    TIMEOUTS,
    Thresholds,
    ToolDesign,
    ToolStats,
    advise,
    bucket_of,
    duration_bin,
    exact_percentile,
    percentile,
    quiet,
    reading,
    rising_p_value,
)

durations = st.floats(0, 86_400_000, allow_nan=False) | st.integers(0, 86_400_000)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(durations, min_size=1, max_size=200), p=st.sampled_from((0.5, 0.95, 0.99, 1.0))
)
def test_it_reads_a_nearest_rank_percentile_within_one_percent_or_one_ms(
    values: list[float], p: float
) -> None:
    bins = Counter(duration_bin(value) for value in values)
    exact = exact_percentile(values, p)
    read = percentile(bins, p)
    assert exact is not None
    assert read is not None
    assert abs(read - exact) <= max(0.01 * exact, 1.0)


def test_a_duration_at_a_bins_upper_edge_is_read_within_one_percent() -> None:
    """Hypothesis found it (not derandomized): 140 ms was read as 138.6, its bin's point
    rounded to 0.1 ms, 1.4 ms (just over 1 %) away."""
    read = percentile(Counter([duration_bin(140.0)]), 0.5)
    assert read is not None
    assert abs(read - 140.0) <= 0.01 * 140.0


def test_it_counts_timed_out_calls_at_their_own_limits() -> None:
    bins = Counter(duration_bin(v) for v in [10.0] * 6)
    censored = {2000: 3, 500: 1}
    # Sorted: 10 x6, 500 (limit), 2000 x3 (limit).
    assert reading(bins, censored, 0.5) == reading(bins, {}, 0.5)
    found = reading(bins, censored, 0.7)
    assert found is not None
    assert (found.ms, found.kind) == (500, "limit")
    found = reading(bins, censored, 1.0)
    assert found is not None
    assert (found.ms, found.kind) == (2000, "limit")


def test_a_finished_call_in_the_same_bin_ranks_before_a_timed_out_one() -> None:
    found = reading(Counter([duration_bin(1999.0)]), {2000: 1}, 0.5)
    assert found is not None
    assert found.kind == "estimate"


def test_it_reads_whole_milliseconds_below_100_ms_exactly() -> None:
    bins = Counter(duration_bin(v) for v in [3, 7, 7, 42, 99])
    assert percentile(bins, 0.5) == 7
    assert percentile(bins, 1.0) == 99


def test_it_puts_a_time_in_its_five_minute_bucket() -> None:
    assert bucket_of("2026-11-29T17:59:59.999Z") == "2026-11-29T17:55"
    assert bucket_of("2026-11-29T18:00:00.000Z") == "2026-11-29T18:00"


def _exact_tail(late_hits: int, late_n: int, rest_hits: int, rest_n: int) -> float:
    total, hits = late_n + rest_n, late_hits + rest_hits
    tail = sum(
        Fraction(comb(late_n, x) * comb(rest_n, hits - x), comb(total, hits))
        for x in range(late_hits, min(hits, late_n) + 1)
    )
    return float(tail)


@pytest.mark.parametrize(
    "counts", [(5, 10, 0, 30), (3, 25, 1, 75), (10, 50, 10, 150), (0, 10, 4, 30), (40, 60, 2, 180)]
)
def test_it_computes_the_one_sided_fisher_tail_exactly(counts: tuple[int, int, int, int]) -> None:
    assert rising_p_value(*counts) == pytest.approx(_exact_tail(*counts), rel=1e-9)


def test_it_does_not_call_a_small_rise_significant() -> None:
    # 2 of 10 late against 1 of 30 before: a plain difference of rates (20 % vs 3 %) looks large;
    # the exact test says it is chance at this sample size.
    assert rising_p_value(2, 10, 1, 30) > 0.01


def stats(**counts: int) -> ToolStats:
    found = ToolStats()
    found.add(counts)
    return found


def binned(values: list[float], **counts: int) -> ToolStats:
    found = stats(**counts)
    found.add(Counter(f"{BIN}{duration_bin(v)}" for v in values))
    return found


def codes(advice: list[dict[str, object]]) -> list[object]:
    return [item["code"] for item in advice]


def test_it_suggests_a_timeout_from_the_p99_with_headroom() -> None:
    values = [100.0] * 98 + [7900.0, 7900.0]
    found = advise(binned(values, calls=100, finished=100), stats(), ToolDesign())
    (item,) = found
    assert item["code"] == "timeout-suggested"
    evidence = item["evidence"]
    assert isinstance(evidence, dict)
    assert evidence["calls"] == 100
    # p99 ≈ 7.9 s, x1.5 = 11.9 s, rounded up to whole seconds.
    assert evidence["suggested"] == {"timeout_s": 12.0}


def test_it_gives_no_advice_below_the_minimum_sample() -> None:
    values = [100.0] * 19
    assert advise(binned(values, calls=19, finished=19), stats(), ToolDesign()) == []


def test_it_calls_a_timeout_too_tight_when_timeouts_cluster_at_the_limit() -> None:
    total = stats(calls=40, finished=30, timeouts=10, at_limit=9, limit_ms=20000)
    found = advise(total, stats(), ToolDesign(timeout_s=2.0))
    assert codes(found) == ["timeout-too-tight"]
    evidence = found[0]["evidence"]
    assert isinstance(evidence, dict)
    assert evidence["suggested"] == {"timeout_s": 4.0}
    assert evidence["timeout_rate"] == 0.25


def test_it_does_not_call_scattered_timeouts_too_tight() -> None:
    total = stats(calls=40, finished=30, timeouts=10, at_limit=2, limit_ms=20000)
    assert advise(total, stats(), ToolDesign(timeout_s=2.0)) == []


def test_it_names_the_async_alternative_when_the_timeout_rate_rises() -> None:
    total = stats(calls=120, finished=108, timeouts=12, at_limit=3, limit_ms=12 * 20000)
    late = stats(calls=30, timeouts=11)
    found = advise(total, late, ToolDesign(timeout_s=20.0, async_alternative="report.start"))
    assert "async-candidate" in codes(found)
    item = next(a for a in found if a["code"] == "async-candidate")
    assert "report.start" in str(item["message"])
    assert "Fisher" in str(item["message"])
    evidence = item["evidence"]
    assert isinstance(evidence, dict)
    assert evidence["late_timeouts"] == 11
    assert evidence["p_value"] < 0.01


def test_it_never_tells_an_async_job_to_become_one() -> None:
    """The walkthrough: launch_background_job (mode: async_job) was told "Raise timeout_s to 10,
    or make the tool an async job"."""
    total = stats(calls=40, finished=30, timeouts=10, at_limit=10, limit_ms=50000)
    (item,) = advise(total, stats(), ToolDesign(timeout_s=5.0, mode="async_job"))
    assert item["code"] == "timeout-too-tight"
    assert "async job" not in str(item["message"])
    assert str(item["message"]).endswith("Raise timeout_s to 10.")
    (item,) = advise(total, stats(), ToolDesign(timeout_s=5.0))
    assert str(item["message"]).endswith("or make the tool an async job.")


def test_a_sync_tool_that_times_out_at_a_long_limit_is_slow() -> None:
    """Timed-out calls count at their limit in the p95 the async rule reads."""
    total = stats(calls=30, finished=10, timeouts=20, at_limit=0, limit_ms=20 * 15000)
    total.add({"c:15000": 20})
    total.add(Counter(f"{BIN}{duration_bin(50.0)}" for _ in range(10)))
    item = next(
        a
        for a in advise(total, stats(), ToolDesign(timeout_s=15.0))
        if a["code"] == "async-candidate"
    )
    assert str(item["message"]).startswith(
        "This synchronous tool has a p95 of at least 15 s (over the 10 s threshold): convert it"
    )  # was "A synchronous tool that its p95 is at least 15 s, over 10 s: convert it"


def test_it_says_why_it_is_silent_and_watches_a_few_timeouts() -> None:
    found = quiet(stats(calls=5, finished=2, timeouts=3))
    assert found is not None
    assert found["message"] == "5 of 20 calls needed before advice"
    assert found["watch"] == "watch: 3 of 5 calls timed out"
    calm = quiet(stats(calls=5, finished=5))
    assert calm is not None
    assert calm["watch"] is None
    assert quiet(stats(calls=20, finished=20)) is None


def test_it_calls_a_slow_synchronous_tool_an_async_candidate_but_not_an_async_one() -> None:
    slow = binned([12_000.0] * 30, calls=30, finished=30)
    assert codes(advise(slow, stats(), ToolDesign(timeout_s=30.0))) == ["async-candidate"]
    assert advise(slow, stats(), ToolDesign(timeout_s=30.0, mode="async_job")) == []


def test_it_calls_early_start_ineffective_when_most_early_runs_are_wasted() -> None:
    total = stats(calls=30, finished=30, **{EARLY: 20, EARLY_DROPPED: 12, DEDUPS: 5})
    assert codes(advise(total, stats(), ToolDesign(timeout_s=5.0, early=True))) == [
        "early-ineffective"
    ]
    assert advise(total, stats(), ToolDesign(timeout_s=5.0, early=False)) == []


def test_it_warns_of_retry_risk_on_an_exploitation_tool_that_times_out() -> None:
    total = stats(**{CALLS: 25, FINISHED: 24, TIMEOUTS: 1, AT_LIMIT: 0, LIMIT_MS: 5000})
    design = ToolDesign(timeout_s=5.0, exploitation=True)
    found = advise(total, stats(), design)
    assert codes(found) == ["retry-risk"]
    assert advise(total, stats(), ToolDesign(timeout_s=5.0, exploitation=True, confirm=True)) == []


def test_it_reads_its_thresholds_from_the_caller() -> None:
    values = [100.0] * 10
    found = advise(
        binned(values, calls=10, finished=10), stats(), ToolDesign(), Thresholds(min_calls=5)
    )
    assert codes(found) == ["timeout-suggested"]


def test_a_bin_estimate_never_exceeds_the_exact_max() -> None:
    # 511 ms sits low in its bin, whose point is about 1 % higher: read raw, p50/p95/p99 were
    # "≈ 516 ms" beside a max of "511 ms".
    stats = health.ToolStats()
    stats.add({"calls": 3, "finished": 3, f"h:{health.duration_bin(511.0)}": 3, "max_us": 511_000})
    assert health.bin_value(health.duration_bin(511.0)) > 511.0
    figures = stats.figures()
    assert figures["max_ms"] == health.Reading(511.0, health.EXACT_FIGURE)
    for name in ("p50_ms", "p95_ms", "p99_ms"):
        assert figures[name] == health.Reading(511.0, health.ESTIMATE)


def test_a_censored_figure_is_not_capped_at_the_finished_max() -> None:
    stats = health.ToolStats()
    stats.add({"calls": 2, "finished": 1, "h:10": 1, "max_us": 10_000, "timeouts": 1, "c:2000": 1})
    figures = stats.figures()
    assert figures["p99_ms"] == health.Reading(2000.0, health.LIMIT)
    assert figures["max_ms"] == health.Reading(2000.0, health.LIMIT)
