"""A known set of events and the figures ``GET /api/v1/metrics`` must show for it: shared by the
in-process test, the two-worker test, the real-Prometheus test and the container test (no Django
here: the real-server tests import it too)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

SEARCH = "workspace_jobs.search"
FETCH = "workspace_jobs.fetch"
#: (duration ms, count) of the search tool's finished calls.
SEARCH_DURATIONS = ((3.0, 4), (40.0, 3), (700.0, 2), (12_000.0, 1))
SEARCH_TIMEOUTS = 2
FETCH_REJECTED = ("tool-not-allowed", 3)


def _event(
    type_: str, turn: str, at: datetime, agent: str = "main", **fields: Any
) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "ts": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "agent": agent,
        "turn_id": turn,
        "iteration": 0,
        "type": type_,
        **fields,
    }


def known_events(tag: str, at: datetime | None = None) -> list[dict[str, Any]]:
    """The events: one round per call, 3 finished ``ok`` and 1 ``failed`` among them (the rest
    stay open); ``tag`` keeps the turn ids of two uses apart."""
    at = at or datetime.now(UTC) - timedelta(minutes=5)
    events: list[dict[str, Any]] = []
    n = 0

    def turn() -> str:
        nonlocal n
        n += 1
        return f"{tag}-{n}"

    def call(kind: str, tool: str, **fields: Any) -> list[dict[str, Any]]:
        t = turn()
        return [
            _event("round.started", t, at, max_actions=2),
            _event(kind, t, at, action_index=0, tool_id=tool, **fields),
        ]

    for ms, count in SEARCH_DURATIONS:
        for _ in range(count):
            events += call("tool.finished", SEARCH, tool_call_id="c", status="ok", duration_ms=ms)
    for _ in range(SEARCH_TIMEOUTS):
        events += call(
            "tool.timeout",
            SEARCH,
            tool_call_id="c",
            limit_ms=30_000,
            elapsed_ms=30_000,
            async_alternative=None,
        )
    code, count = FETCH_REJECTED
    for _ in range(count):
        events += call("action.rejected", FETCH, code=code)
    finished = [e["turn_id"] for e in events if e["type"] == "round.started"][:4]
    for t, outcome in zip(finished, ("ok", "ok", "ok", "failed"), strict=True):
        events.append(_event("round.finished", t, at + timedelta(seconds=1), outcome=outcome))
    return events


ROUNDS = sum(c for _, c in SEARCH_DURATIONS) + SEARCH_TIMEOUTS + FETCH_REJECTED[1]


def expected(times: int = 1) -> dict[str, float]:
    """The samples the events give when posted ``times`` times (each with another tag)."""
    calls = sum(c for _, c in SEARCH_DURATIONS)
    s = f'agent="main",tool="{SEARCH}"'
    f = f'agent="main",tool="{FETCH}"'
    samples = {
        'traitdeck_rounds_total{agent="main",outcome="ok"}': 3,
        'traitdeck_rounds_total{agent="main",outcome="failed"}': 1,
        'traitdeck_rounds_open{agent="main"}': ROUNDS - 4,
        f'traitdeck_actions_total{{{s},disposition="accepted",code=""}}': calls + SEARCH_TIMEOUTS,
        f'traitdeck_actions_total{{{f},disposition="rejected",code="{FETCH_REJECTED[0]}"}}': (
            FETCH_REJECTED[1]
        ),
        f"traitdeck_tool_timeouts_total{{{s}}}": SEARCH_TIMEOUTS,
        f'traitdeck_tool_call_duration_seconds_bucket{{{s},le="0.005"}}': 4,
        f'traitdeck_tool_call_duration_seconds_bucket{{{s},le="0.05"}}': 7,
        f'traitdeck_tool_call_duration_seconds_bucket{{{s},le="1.0"}}': 9,
        f'traitdeck_tool_call_duration_seconds_bucket{{{s},le="10.0"}}': 9,
        f'traitdeck_tool_call_duration_seconds_bucket{{{s},le="15.0"}}': 10,
        f'traitdeck_tool_call_duration_seconds_bucket{{{s},le="+Inf"}}': calls,
        f"traitdeck_tool_call_duration_seconds_count{{{s}}}": calls,
        'traitdeck_ingest_events_total{result="accepted"}': len(known_events("x")),
    }
    return {canon(key): value * times for key, value in samples.items()}


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def canon(key: str) -> str:
    """``name{labels}`` with its labels in name order (as prometheus-client writes them)."""
    name, _, rest = key.partition("{")
    pairs = sorted(_LABEL.findall(rest))
    return name + ("{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}" if pairs else "")


def samples(text: str) -> dict[str, float]:
    """``name{labels} value`` lines of an exposition (comments left out), keyed by
    :func:`canon`."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            out[canon(f"{match.group(1)}{{{match.group(2) or ''}}}")] = float(match.group(3))
    return out
