"""The simulator's latencies: heavy-tailed, one tool slowing down, one timing out at its limit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import median

from engine.tools.resolution import resolve_agent
from observe.domain.events import parse_event
from observe.domain.health import Thresholds, ToolDesign, ToolStats, advise, round_tallies
from observe.domain.rounds import assembly_merge, assembly_new
from policy.domain.yaml_io import load_policy
from simulator.runtime import Latency, Simulator
from simulator.scenarios import Palette

SAMPLE = Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
DATA = load_policy(SAMPLE.read_bytes()).data
START = datetime(2026, 11, 30, tzinfo=UTC)


def test_it_names_the_slowing_tool_and_the_one_at_its_limit_from_the_policy() -> None:
    palette = Palette.of(resolve_agent(DATA, "main"))
    assert palette.slowing is not None
    assert palette.slowing.tool_id == "workspace_jobs.export_report"  # sync, async alternative
    assert palette.at_limit is not None
    assert palette.at_limit.tool_id == "mcp.browser.close"  # the shortest timeout, by id


def test_it_draws_heavy_tailed_durations() -> None:
    rng = random.Random(3)
    draws = sorted(Latency().draw_ms(rng, 100.0) for _ in range(5000))
    assert 85 <= median(draws) <= 115
    assert draws[int(0.99 * len(draws))] > 5 * median(draws)


def test_it_slows_the_slowing_tool_down_as_the_simulation_ages() -> None:
    young = Latency(slowing="x", age_s=0).median_ms("x", 20_000, "plain")
    old = Latency(slowing="x", age_s=600).median_ms("x", 20_000, "plain")
    assert old >= 4 * young


def _stats(minutes: int, seed: int = 5) -> dict[str, ToolStats]:
    simulator = Simulator(DATA, seed=seed)
    found: dict[str, ToolStats] = {}
    for n in range(minutes * 30):  # make demo's 0.5 rounds per second
        _, events = simulator.next_round(START + timedelta(seconds=2 * n))
        state = assembly_merge(assembly_new(), [parse_event(e) for e in events])
        for (_, tool, _), tally in round_tallies("main", state).items():
            found.setdefault(tool, ToolStats()).add(tally)
    return found


def test_it_makes_async_candidate_fire_within_minutes_of_the_demo() -> None:
    stats = _stats(5)["workspace_jobs.export_report"]
    design = ToolDesign(timeout_s=20, async_alternative="launch_background_job")
    codes = [item["code"] for item in advise(stats, ToolStats(), design, Thresholds())]
    assert "async-candidate" in codes


def test_it_keeps_one_tool_timing_out_at_its_limit() -> None:
    stats = _stats(20)["mcp.browser.close"]
    assert stats["timeouts"] / stats["calls"] > 0.2
    assert stats["at_limit"] == stats["timeouts"]
