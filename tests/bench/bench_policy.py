"""Benchmark: how long Traitdeck takes to load, validate and export a large policy.

Run with `make bench`. Prints figures; asserts nothing (speed targets are read, not tested).
With ``BENCH_JSON=FILE`` it also merges its figures into that JSON file under ``"validate"``
(other benches write other keys of the same file).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.tools.resolution import resolve_agent
from policy.cli import run
from policy.domain.analysis import analyze_text
from policy.domain.yaml_io import CLI_MAX_BYTES, export_text

TOOLS = 10_000
AGENTS = 50
#: Each figure is the best of this many runs: the machine is shared, the best run is the cost.
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
#: Targets of the performance issue, as ratios to libyaml in the same run.
VALIDATE_TARGET, FMT_TARGET = 3.0, 4.0
STRATEGIES = [["exploration"], ["exploitation"], ["neutral"], ["exploration", "exploitation"]]


def big_policy(agents: int, connections: int, tools: int) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for a in range(agents):
        conns = []
        for c in range(connections):
            names = [f"tool_{t}" for t in range(tools)]
            conns.append(
                {
                    "kind": "python" if c % 2 else "mcp",
                    "ref": f"tools/c{c}.py",
                    "server_id": f"srv{c}",
                    "alias": f"conn{c}",
                    "allowed": names,
                    "tool_traits": {
                        n: {"strategy": STRATEGIES[i % len(STRATEGIES)]}
                        for i, n in enumerate(names)
                    },
                    "tool_execution": {n: {"timeout_s": 5, "mode": "sync"} for n in names},
                }
            )
        body[f"agent{a}"] = {"tools": conns}
    return {"surfaces": {"as_consumer": {"agents": body}}}


def python_connections(agents: int, tools_per_agent: int) -> dict[str, Any]:
    """``agents`` agents, each with one python connection allowing ``tools_per_agent`` tools,
    every tool with its own ``tool_traits`` entry."""
    body: dict[str, Any] = {}
    for a in range(agents):
        names = [f"tool_{t}" for t in range(tools_per_agent)]
        connection = {
            "kind": "python",
            "ref": f"tools/agent{a}.py",
            "alias": f"conn{a}",
            "allowed": names,
            "tool_traits": {
                n: {"strategy": STRATEGIES[i % len(STRATEGIES)]} for i, n in enumerate(names)
            },
        }
        body[f"agent{a}"] = {"tools": [connection]}
    return {"surfaces": {"as_consumer": {"agents": body}}}


def measure(label: str, fn: Any) -> Any:
    # Time and memory in separate runs: tracemalloc slows Python code down several times.
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label:<48} {elapsed * 1000:9.1f} ms   peak {peak / 1e6:7.1f} MB")
    return result


def best(fn: Callable[[], object]) -> float:
    """The fastest of ``REPEAT`` runs, in seconds."""
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def cli(*argv: str) -> None:
    """``traitdeck ARGV`` in this process (the real entry point, output kept in memory)."""
    run(list(argv), io.StringIO(), io.StringIO())


@dataclass(frozen=True)
class Row:
    """One figure of the table, beside its baseline measured in the same run."""

    figure: str
    seconds: float
    baseline: str
    baseline_seconds: float
    target: float

    @property
    def ratio(self) -> float:
        return self.seconds / self.baseline_seconds


@dataclass(frozen=True)
class ValidateFigures:
    label: str
    tools: int
    seconds: float
    fmt_seconds: float
    libyaml_seconds: float
    libyaml_dump_seconds: float

    def rows(self) -> list[Row]:
        both = self.libyaml_seconds + self.libyaml_dump_seconds
        return [
            Row(
                f"validate, {self.label}",
                self.seconds,
                "libyaml load",
                self.libyaml_seconds,
                VALIDATE_TARGET,
            ),
            Row(f"fmt, {self.label}", self.fmt_seconds, "libyaml load + C dump", both, FMT_TARGET),
        ]

    def to_json(self) -> dict[str, float | int]:
        return {
            "seconds": self.seconds,
            "fmt_seconds": self.fmt_seconds,
            "libyaml_seconds": self.libyaml_seconds,
            "libyaml_dump_seconds": self.libyaml_dump_seconds,
            "tools": self.tools,
        }


def validate_figures(label: str, data: dict[str, Any], tools: int) -> ValidateFigures:
    """``traitdeck validate`` / ``fmt`` of ``data`` against libyaml's C loader and dumper."""
    text = export_text(data)
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "policy.yaml"
        file.write_text(text, encoding="utf-8")
        return ValidateFigures(
            label=label,
            tools=tools,
            seconds=best(lambda: cli("validate", str(file))),
            fmt_seconds=best(lambda: cli("fmt", str(file))),
            libyaml_seconds=best(lambda: yaml.load(text, Loader=yaml.CSafeLoader)),
            libyaml_dump_seconds=best(lambda: yaml.dump(data, Dumper=yaml.CSafeDumper)),
        )


def print_table(figures: list[ValidateFigures]) -> None:
    print(f"{'figure':<44} {'seconds':>8}  {'baseline':<22} {'seconds':>8} {'ratio':>7}  target")
    for row in (row for f in figures for row in f.rows()):
        verdict = "met" if row.ratio <= row.target else "MISSED"
        print(
            f"{row.figure:<44} {row.seconds:8.2f}  {row.baseline:<22} "
            f"{row.baseline_seconds:8.2f} {row.ratio:6.2f}x  <= {row.target:g}x {verdict}"
        )


def merge_json(path: str, key: str, value: dict[str, Any]) -> None:
    """Set ``key`` in the JSON object at ``path``, keeping the keys other benches wrote."""
    file = Path(path)
    figures = json.loads(file.read_text(encoding="utf-8")) if file.exists() else {}
    figures[key] = value
    partial = file.with_name(file.name + ".partial")
    partial.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    partial.replace(file)  # a reader never sees a half-written file


def main() -> None:
    for agents, connections, tools in [(1, 5, 10), (10, 10, 20), (20, 25, 20)]:
        data = big_policy(agents, connections, tools)
        text = measure(
            f"export {agents}x{connections}x{tools} tools", lambda d=data: export_text(d)
        )
        size = len(text.encode())
        analysis = measure(
            f"load+validate {size / 1e6:.2f} MB",
            lambda t=text: analyze_text(t, max_bytes=CLI_MAX_BYTES),
        )
        assert not analysis.refused
        measure("resolve one agent", lambda d=analysis.data: resolve_agent(d, "agent0"))

    print(f"\n`traitdeck validate` / `fmt` (best of {REPEAT}; libyaml {yaml.__with_libyaml__})")
    one = validate_figures(
        f"{TOOLS // 1000}k tools in one connection", python_connections(1, TOOLS), TOOLS
    )
    spread = validate_figures(
        f"{TOOLS // 1000}k tools over {AGENTS} agents",
        python_connections(AGENTS, TOOLS // AGENTS),
        TOOLS,
    )
    print_table([one, spread])
    if path := os.environ.get("BENCH_JSON"):
        merge_json(path, "validate", {**one.to_json(), f"over_{AGENTS}_agents": spread.to_json()})


if __name__ == "__main__":
    main()
