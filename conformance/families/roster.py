"""KDCube's agent roster (DESIGN §7 "agent roster", issue 37 §4) recorded with the admin widget's
own code, against Traitdeck's ``engine.catalog.multi_action.kdcube_roster``.

Where the roster is defined: only in the ``agentic-config`` widget
(``npm/packages/components-react/src/agentic-config/api.ts``: ``getAppAgents`` lists the react
slots, ``getAgentProfiles`` adds the ``surfaces.as_consumer.agents`` keys). The backend has no
agent list: its admin route ``GET /admin/integrations/bundles/{id}/props`` answers the bundle's
``defaults`` and ``props`` and the widget derives the agents from them. So the recorder runs that
TypeScript, unchanged, under node (``conformance/node/roster.mjs``: TypeScript's
``transpileModule`` strips the types; the widget's one GET is answered with ``{"defaults": {},
"props": <case>}``). Node and TypeScript (pinned in the Makefile to KDCube's lockfile's version)
are needed only here, where KDCube is present; the tests read the fixture.

The answer: ``slots`` — ``getAppAgents``'s ``[key, container]`` in its order (JavaScript's key
order: integer-like keys first, ascending), including the widget's ``default_agent`` fallback
when the config names no agent; ``profiles`` — ``getAgentProfiles``'s ``[key, reactContainer,
hasConsumer]``, listed here in Python's ``sorted`` order (the widget sorts with the browser's
``localeCompare``, a display order Traitdeck does not copy).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

NAME = "roster"
MIN_CASES = 150

WIDGET_API = "npm/packages/components-react/src/agentic-config/api.ts"
SCRIPT = Path(__file__).resolve().parent.parent / "node" / "roster.mjs"
#: Where ``make conformance`` installs TypeScript (``KDCUBE_TYPESCRIPT`` overrides).
TYPESCRIPT = Path(".venv-kdcube/node/node_modules/typescript")

KEYS = [
    "main",
    "default_agent",
    "default",
    "my-agent",
    "my_agent",
    "1",
    "0",
    "07",
    "10",
    "4294967294",
    "4294967295",
    "-1",
    "agents",
    "instructions",
    "instruction_profiles",
    "model",
    "multi_action_mode",
    "subagents",
    "role_models",
    "Model",
    "x.y",
    " main ",
]
VALUES: list[Any] = [{}, {}, {"instructions": {}}, {"tools": []}, "text", [], None, 3, True]


def _value(rng: random.Random) -> Any:
    return rng.choice(VALUES)


def _mapping(rng: random.Random, n: int) -> dict[str, Any]:
    return {key: _value(rng) for key in rng.sample(KEYS, n)}


def _case(rng: random.Random) -> dict[str, Any]:
    data: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.8:
        react: Any = _mapping(rng, rng.randint(0, 5))
        if rng.random() < 0.5:
            react["agents"] = rng.choice(
                [_mapping(rng, rng.randint(0, 4)), _mapping(rng, 2), [], "x", None]
            )
        data["react"] = react
    elif roll < 0.9:
        data["react"] = rng.choice([[], "react", None, 1])
    if rng.random() < 0.6:
        agents: Any = rng.choice(
            [_mapping(rng, rng.randint(0, 3)), _mapping(rng, 1), [], "x", None]
        )
        data["surfaces"] = rng.choice(
            [{"as_consumer": {"agents": agents}}, {"as_consumer": agents}, agents]
        )
    if rng.random() < 0.2:
        data["config"] = {"react": _mapping(rng, 2)}
    return data


def _hand_cases() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("empty-config-falls-back-to-default-agent", {}),
        (
            "consumer-only-still-lists-the-fallback",
            {"surfaces": {"as_consumer": {"agents": {"main": {}}}}},
        ),
        ("react-agents-then-root-keys", {"react": {"b": {}, "agents": {"a": {}}, "model": {}}}),
        ("config-react-is-not-read", {"config": {"react": {"main": {}}}}),
        ("integer-like-keys-first", {"react": {"b": {}, "10": {}, "2": {}, "07": {}}}),
        (
            "same-key-in-both-containers-lives-at-the-root",
            {"react": {"a": {}, "agents": {"a": {}}}},
        ),
        ("react-agents-not-a-mapping", {"react": {"agents": ["main"], "main": {}}}),
        (
            "both-roots-union",
            {
                "react": {"agents": {"planner": {}}, "default_agent": {}},
                "surfaces": {"as_consumer": {"agents": {"planner": {}, "writer": None}}},
            },
        ),
    ]


def inputs() -> list[dict[str, Any]]:
    cases = [{"id": name, "data": data} for name, data in _hand_cases()]
    rng = random.Random(3704)
    cases += [{"id": f"random-{n:03d}", "data": _case(rng)} for n in range(200)]
    return cases


def _typescript() -> Path:
    raw = os.environ.get("KDCUBE_TYPESCRIPT", "").strip()
    path = Path(raw) if raw else TYPESCRIPT
    if not (path / "package.json").is_file():
        raise SystemExit(
            f"roster: TypeScript is not installed at {path} (make conformance installs it; "
            "or set KDCUBE_TYPESCRIPT to a typescript package directory)"
        )
    return path.resolve()


def record(rt: Any) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        raise SystemExit("roster: node is not installed (apt-get install nodejs)")
    api = Path(rt.src) / WIDGET_API
    cases = inputs()
    payload = json.dumps([{"defaults": {}, "props": case["data"]} for case in cases])
    proc = subprocess.run(
        [node, str(SCRIPT), str(api), str(_typescript())],
        input=payload,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"roster: the widget's code failed under node:\n{proc.stderr[-3000:]}")
    answers = json.loads(proc.stdout)
    return [
        {
            "id": case["id"],
            "input": {"data": case["data"]},
            "runtime": {
                "slots": [[slot["key"], slot["container"]] for slot in answer["slots"]],
                "profiles": sorted(
                    [p["key"], p["reactContainer"], p["hasConsumer"]] for p in answer["profiles"]
                ),
            },
        }
        for case, answer in zip(cases, answers, strict=True)
    ]


def predict(case: dict[str, Any]) -> Any:
    from engine.catalog.multi_action import kdcube_roster, react_agent_keys

    roster = kdcube_roster(case["data"])
    slots = [list(slot) for slot in react_agent_keys(case["data"])]
    return {
        "slots": slots or [[e.name, e.react_container] for e in roster if e.fallback],
        "profiles": sorted([e.name, e.react_container, e.has_consumer] for e in roster),
    }
