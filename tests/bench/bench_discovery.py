"""Benchmark: discovery of a 5,000-tool MCP server (every page, caps, manifest entries) and
validation of the policy that reaches it through ``*``, beside the SDK's own ``list_tools``
loop over the same server as the baseline. Both start the server over stdio (the SDK's
``mcp_servers.py many``), so both include the process start.

Rounds alternate (SDK loop, then ours) so both see the same load; the figures are the best
round of each. Traitdeck's own share is what it does beyond its listing (the listing's own
time subtracted from each round): manifest entries, parse, validation.

Run with ``make bench``. With ``BENCH_JSON=FILE`` it merges ``"discovery"`` into that file.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from discovery.mcp_list import Limits, Target, list_tools, manifest_entries  # noqa: E402
from engine.tools.manifest import parse_manifest  # noqa: E402
from policy.domain.validation.validate import validate_policy  # noqa: E402
from policy.domain.yaml_io import dump_body, load_policy  # noqa: E402
from tests.bench.bench_policy import merge_json  # noqa: E402

SERVER = Path(__file__).resolve().parents[1] / "discovery" / "mcp_servers.py"
ARGV = (sys.executable, str(SERVER), "many")
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
TARGET_S = 3.0


async def sdk_loop() -> int:
    params = StdioServerParameters(command=ARGV[0], args=list(ARGV[1:]))
    count = 0
    async with Client(params, mode="legacy", cache=None) as client:
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            count += len(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return count


def discover_and_validate() -> float:
    """One discovery and validation; returns Traitdeck's own share in seconds."""
    listing = anyio.run(list_tools, Target("stdio", argv=ARGV), Limits(timeout_s=60))
    listed = time.perf_counter()
    entries = manifest_entries(
        listing, alias="big", server_id="big", by="bench", at="now", transport="stdio"
    )
    manifest = parse_manifest(entries)
    policy: dict[str, Any] = {
        "surfaces": {
            "as_consumer": {
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "mcp",
                                "server_id": "big",
                                "alias": "big",
                                "allowed": ["*"],
                                "tool_traits": {"*": {"strategy": ["exploration"]}},
                            }
                        ]
                    }
                }
            }
        }
    }
    loaded = load_policy(dump_body(policy))
    diagnostics = validate_policy(loaded.data, loaded.source, manifest)
    assert any(d.code == "mcp-wildcard-mixed" for d in diagnostics)
    assert len(listing.tools) == 5000
    return time.perf_counter() - listed


def main() -> None:
    baselines, totals, shares = [], [], []
    for _ in range(REPEAT):
        started = time.perf_counter()
        assert anyio.run(sdk_loop) == 5000
        baselines.append(time.perf_counter() - started)
        started = time.perf_counter()
        shares.append(discover_and_validate())
        totals.append(time.perf_counter() - started)
    baseline, ours, share = min(baselines), min(totals), min(shares)
    print(f"{'figure':<52} {'seconds':>8}  {'baseline':<26} {'seconds':>8} {'ratio':>7}  target")
    print(
        f"{'discover 5,000-tool MCP server + validate':<52} {ours:8.2f}  "
        f"{'SDK list_tools loop':<26} {baseline:8.2f} {ours / baseline:7.2f}  <= {TARGET_S:.0f} s"
    )
    print(
        f"{'  of which Traitdeck beyond its listing':<52} {share:8.2f}  "
        f"{'':<26} {'':>8} {share / baseline:7.0%}"
    )
    if path := os.environ.get("BENCH_JSON"):
        merge_json(
            path,
            "discovery",
            {
                "tools": 5000,
                "seconds": round(ours, 3),
                "sdk_loop_seconds": round(baseline, 3),
                "own_share_seconds": round(share, 3),
            },
        )


if __name__ == "__main__":
    main()
