"""Benchmark: how long Traitdeck takes to load, validate and export a large policy.

Run with `make bench`. Prints figures; asserts nothing (speed targets are read, not tested).
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

from policy.domain.analysis import analyze_text
from policy.domain.resolution import resolve_agent
from policy.domain.yaml_io import CLI_MAX_BYTES, export_text


def big_policy(agents: int, connections: int, tools: int) -> dict[str, Any]:
    strategies = [["exploration"], ["exploitation"], ["neutral"], ["exploration", "exploitation"]]
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
                        n: {"strategy": strategies[i % len(strategies)]}
                        for i, n in enumerate(names)
                    },
                    "tool_execution": {n: {"timeout_s": 5, "mode": "sync"} for n in names},
                }
            )
        body[f"agent{a}"] = {"tools": conns}
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


if __name__ == "__main__":
    main()
