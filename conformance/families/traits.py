"""Trait values: strategy normalisation, the early profile, and ordered compatibility (DESIGN §2.1,
§2.2) — the runtime's ``tool_traits`` functions against Traitdeck's ``engine.traits.traits``."""

from __future__ import annotations

import itertools
from typing import Any

NAME = "traits"
MIN_CASES = 100

_STRATEGIES: list[Any] = [
    None,
    [],
    "",
    "bogus",
    5,
    True,
    {"a": 1},
    "exploration",
    " Exploration ",
    "NEUTRAL",
    ["neutral", "exploration"],
    ["unknown"],
    ["unknown", "exploitation"],
    ["exploitation", "unknown"],
    ["Neutral", "neutral", " neutral"],
    ["bogus", "exploration"],
    [5, "neutral"],
    ["", "neutral"],
    ("exploration", "exploitation"),
    [None, "exploration"],
    [["neutral"]],
    "unknown",
    ["exploitation", "exploration", "neutral"],
]

_PROFILE = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}
_EXECUTIONS: list[Any] = [
    None,
    True,
    "x",
    [],
    {},
    dict(_PROFILE),
    {k: v.upper() + " " for k, v in _PROFILE.items()},
    {**_PROFILE, "queue": "q"},
    {k: v for k, v in _PROFILE.items() if k != "replay"},
    {**_PROFILE, "replay": "always"},
    {**_PROFILE, "trigger": None},
]


def record(rt: Any) -> list[dict[str, Any]]:
    t = rt.traits
    cases: list[dict[str, Any]] = []
    for n, raw in enumerate(_STRATEGIES):
        cases.append(
            {
                "id": f"strategy-{n}",
                "input": {"kind": "strategy", "raw": list(raw) if isinstance(raw, tuple) else raw},
                "runtime": t.normalize_strategy(raw),
            }
        )
    for n, raw in enumerate(_EXECUTIONS):
        traits = {"strategy": ["neutral"], "execution": raw}
        cases.append(
            {
                "id": f"early-{n}",
                "input": {"kind": "early", "traits": traits},
                "runtime": bool(
                    t.strategy_values(traits) == {"neutral"}
                    and t.executes_parallel_on_tool_call_complete(traits)
                ),
            }
        )
    values = ["exploration", "exploitation", "neutral", "unknown"]
    sets = [[v] for v in values] + [list(p) for p in itertools.combinations(values, 2)]
    for a, b in itertools.product(sets, sets):
        cases.append(
            {
                "id": f"compatible-{'+'.join(a)}-{'+'.join(b)}",
                "input": {"kind": "compatible", "earlier": a, "following": b},
                "runtime": t.strategies_compatible({"strategy": a}, {"strategy": b}),
            }
        )
    return cases


def predict(case: dict[str, Any]) -> Any:
    from engine.traits import traits

    if case["kind"] == "strategy":
        return list(traits.normalize_strategy(case["raw"]))
    if case["kind"] == "early":
        return traits.is_early(case["traits"])
    return traits.compatible(
        traits.normalize_strategy(case["earlier"]), traits.normalize_strategy(case["following"])
    )
