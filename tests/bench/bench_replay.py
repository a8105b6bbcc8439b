"""Benchmark: replaying recorded rounds under two policies (the impact of a change, issue 13).

Run with `make bench`. ``REPLAY_ROUNDS`` (default 100,000) simulator rounds of the sample's agent
are written as ``rounds.jsonl`` and replayed by ``traitdeck replay NEW --rounds … --against OLD``
in this process (parsing included), and by the engine alone on rounds already in memory. Target:
100,000 rounds in ≤ 10 s. With ``BENCH_JSON=FILE`` the figures are merged under ``"replay"``.
Asserts nothing.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.replay.draft_impact import replay  # noqa: E402
from policy.cli import run  # noqa: E402
from tests.bench.bench_policy import merge_json  # noqa: E402
from tests.engine.test_draft_impact import (  # noqa: E402
    LAUNCH_EXPLORES,
    SAMPLE,
    recorded_rounds,
    resolution,
)

ROUNDS = int(os.environ.get("REPLAY_ROUNDS", "100000"))
TARGET_S = 10.0


def main() -> None:
    rounds = recorded_rounds(ROUNDS, seed=11)
    decisions = sum(len(a) for r in rounds for a in r.spec.attempts)
    old, new = resolution(SAMPLE), resolution(LAUNCH_EXPLORES)
    started = time.perf_counter()
    report = replay(rounds, baseline=lambda agent: old, candidate=lambda agent: new)
    engine_s = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "old.yaml").write_text(SAMPLE, encoding="utf-8")
        (folder / "new.yaml").write_text(LAUNCH_EXPLORES, encoding="utf-8")
        with (folder / "rounds.jsonl").open("w", encoding="utf-8") as out:
            for r in rounds:
                attempts = [
                    [{"action": a.action, "tool_id": a.tool_id, "params": a.params} for a in at]
                    for at in r.spec.attempts
                ]
                line = {"agent": r.agent, "turn_id": r.spec.turn_id, "iteration": 0}
                out.write(json.dumps({**line, "attempts": attempts}) + "\n")
        argv = ["replay", str(folder / "new.yaml"), "--rounds", str(folder / "rounds.jsonl")]
        argv += ["--against", str(folder / "old.yaml"), "--format", "json"]
        started = time.perf_counter()
        stdout, stderr = io.StringIO(), io.StringIO()
        code = run(argv, stdout, stderr)
        cli_s = time.perf_counter() - started
    assert code == 0, stderr.getvalue()

    rate = ROUNDS / cli_s
    scaled = cli_s * 100_000 / ROUNDS
    print(f"replay: {ROUNDS:,} rounds ({decisions:,} actions), {len(report.affected):,} affected")
    print("| figure | measured | target | |")
    print("|---|---|---|---|")
    print(
        f"| `traitdeck replay`, {ROUNDS:,} rounds (parse + two predictions each) | {cli_s:.2f} s"
        f" ({rate:,.0f} rounds/s; 100k ≈ {scaled:.1f} s) | 100k ≤ {TARGET_S:.0f} s |"
        f" {'met' if scaled <= TARGET_S else 'MISSED'} |"
    )
    print(
        f"| engine only, rounds in memory | {engine_s:.2f} s ({ROUNDS / engine_s:,.0f} rounds/s)"
        " | — | |"
    )
    path = os.environ.get("BENCH_JSON")
    if path:
        merge_json(
            path,
            "replay",
            {
                "rounds_per_s": round(rate),
                "rounds": ROUNDS,
                "seconds": round(cli_s, 3),
                "engine_rounds_per_s": round(ROUNDS / engine_s),
                "affected": len(report.affected),
            },
        )


if __name__ == "__main__":
    main()
