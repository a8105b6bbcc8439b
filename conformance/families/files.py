"""Seeded random bundles that write files — ``react.write``, ``react.patch``, renderers
(``rendering_tools.write_*``) and code execution with contract filenames — so the runtime's
cross-action causality checks (same-file collision, a renderer reading a file of the same round)
are exercised: paths equal in another case, with ``/`` or as ``conv:fi:`` references, renders of
``ref:`` files written in this round (earlier or later in the bundle) or in an earlier one.

Two kinds of case:

- ``round``: the whole round pipeline (``conformance.round_driver``) against Traitdeck's dry-run,
  compared as the ``rounds`` family compares (the round's ``exec_code_complete`` unsaid: true);
- ``bundle``: the runtime's ``_prepare_safe_multi_action_bundle`` called directly, with
  ``allow_single_exec_with_code`` on or off, against :func:`engine.round.backstop.backstop`.

Contracts whose files make the runtime's answer depend on its set order are the ``setorder``
family's.
"""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

from conformance.families import rounds

NAME = "files"
MIN_CASES = 700
SEED = 20261202
ROUNDS_PER_POLICY = 260
BUNDLES_PER_POLICY = 120

RENDERERS = [
    "rendering_tools.write_pptx",
    "rendering_tools.write_pdf",
    "rendering_tools.write_docx",
]
EXEC = "exec_tools.execute_code_python"


def _agents(renderer_strategy: str) -> dict[str, Any]:
    return {
        "surfaces": {
            "as_consumer": {
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "python",
                                "module": "kdcube_ai_app.apps.chat.sdk.tools.rendering_tools",
                                "alias": "rendering_tools",
                                "allowed": ["write_pptx", "write_pdf", "write_docx"],
                                "tool_traits": {
                                    "*": {"strategy": [renderer_strategy]},
                                    "write_docx": {"strategy": ["exploitation"]},
                                },
                            },
                            {
                                "kind": "python",
                                "module": "kdcube_ai_app.apps.chat.sdk.tools.exec_tools",
                                "alias": "exec_tools",
                                "allowed": ["execute_code_python"],
                                "tool_traits": {
                                    "execute_code_python": {"strategy": ["exploitation"]}
                                },
                            },
                        ]
                    }
                }
            }
        }
    }


#: Name → ``{"policy": …, "manifest": {…}}`` (the shape of ``conformance.round_policies``).
POLICIES: dict[str, dict[str, Any]] = {
    "files": {"policy": _agents("exploitation"), "manifest": {}},
    "files_neutral": {"policy": _agents("neutral"), "manifest": {}},
}

PATHS = [
    "a.md",
    "A.md",
    "/a.md",
    " a.md ",
    "b.md",
    "B.MD",
    "turn_1/files/a.md",
    "Turn_1/Files/A.md",
    "conv:fi:conv_c.turn_1.files/a.md",
    "conv:fi:conv_c.turn_1.files/A.MD",
    "deck.pptx",
    "Deck.PPTX",
    "out.csv",
    "",
]
#: Files no action of a bundle writes: a render of one reads a file of an earlier round.
EARLIER = ["old/notes.md", "turn_0/files/summary.md"]


def _content(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.55:
        return "ref:" + rng.choice(PATHS[:-1])
    if roll < 0.70:
        return "ref:" + rng.choice(EARLIER)
    return rng.choice(["# plain text", "REF:a.md", " ref:a.md", "ref:", "a.md"])


def _path(rng: random.Random) -> Any:
    return rng.choice(PATHS) if rng.random() < 0.95 else rng.choice([None, 5])


def _file_action(rng: random.Random, unique: list[int], *, exec_ok: bool) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.30:
        content = rng.choice(["text", "ref:" + rng.choice(PATHS[:-1])])
        params = {"path": _path(rng), "channel": "canvas", "content": content, "kind": "display"}
        return {"action": "call_tool", "tool_id": "react.write", "params": params}
    if roll < 0.45:
        params = {"path": _path(rng), "channel": "canvas", "patch": "@@ -1 +1 @@", "kind": "edit"}
        return {"action": "call_tool", "tool_id": "react.patch", "params": params}
    if roll < 0.75:
        params = {"path": _path(rng), "content": _content(rng)}
        return {"action": "call_tool", "tool_id": rng.choice(RENDERERS), "params": params}
    if roll < 0.85 and exec_ok:
        # One contract file that may collide, and at most one more no other action writes: the
        # runtime walks a set here, so two colliding files would make its answer hash-dependent.
        contract: Any = [{"name": "r", "filename": rng.choice(PATHS[:-1])}]
        if rng.random() < 0.4:
            unique[0] += 1
            contract.append({"name": "u", "filename": f"unique_{unique[0]}.txt"})
        if rng.random() < 0.08:
            contract = rng.choice([{"filename": "a.md"}, [], "a.md"])
        return {"action": "call_tool", "tool_id": EXEC, "params": {"contract": contract}}
    if roll < 0.90:
        return {"action": "call_tool", "tool_id": "react.plan", "params": {}}
    if roll < 0.94:
        return {"action": "call_tool", "tool_id": "react.read", "params": {"paths": ["a.md"]}}
    return {"action": rng.choice(["complete", "exit"]), "final_answer": "done"}


def _execs(actions: list[dict[str, Any]]) -> int:
    return sum(1 for a in actions if a.get("tool_id") == EXEC)


def generate() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    unique = [0]
    inputs: list[dict[str, Any]] = []
    for policy_name in POLICIES:
        for n in range(ROUNDS_PER_POLICY):
            size = rng.choice([2, 2, 3, 3, 4])
            first = [_file_action(rng, unique, exec_ok=True) for _ in range(size)]
            attempts = [first]
            if rng.random() < 0.12:
                again = copy.deepcopy(first)
                rng.shuffle(again)
                attempts.append(again)
            spec: dict[str, Any] = {
                "turn_id": "turn-1",
                "iteration": rng.randint(0, 2),
                "attempts": attempts,
            }
            cap = rng.choice([None, 3, 3, 4, 4, 0, 1])
            if cap is not None:
                spec["max_actions"] = cap
            inputs.append(
                {
                    "id": f"round-{policy_name}-{n}",
                    "kind": "round",
                    "policy": policy_name,
                    "round": spec,
                    "multi_action_mode": rng.choice(["on", "on", "on", "safe_fanout", "off"]),
                }
            )
        for n in range(BUNDLES_PER_POLICY):
            size = rng.choice([2, 3, 3, 4])
            bundle = [_file_action(rng, unique, exec_ok=True) for _ in range(size)]
            if rng.random() < 0.5 and not _execs(bundle):
                unique[0] += 1
                bundle[rng.randrange(size)] = {
                    "action": "call_tool",
                    "tool_id": EXEC,
                    "params": {
                        "contract": [
                            {"name": "r", "filename": rng.choice(PATHS[:-1])},
                            {"name": "u", "filename": f"unique_{unique[0]}.txt"},
                        ]
                    },
                }
            inputs.append(
                {
                    "id": f"bundle-{policy_name}-{n}",
                    "kind": "bundle",
                    "policy": policy_name,
                    "bundle": bundle,
                    "max_actions": rng.choice([None, 3, 4, 4]),
                    "exec_code_complete": rng.random() < 0.8,
                }
            )
    return inputs


async def _runtime_bundle(rt: Any, adapters: list[dict[str, Any]], case: dict[str, Any]) -> Any:
    from conformance import round_driver

    s = round_driver.solver(rt, max_actions=case["max_actions"], mode="on")
    accepted: list[int] = []
    _kept, error, extra = await s._prepare_safe_multi_action_bundle(
        bundle=[round_driver.decision_of(a) for a in case["bundle"]],
        adapters_by_id=s._adapters_index(adapters),
        allow_single_exec_with_code=case["exec_code_complete"],
        prevalidated_action_indices=set(),
        accepted_action_indices_out=accepted,
    )
    extra = extra or {}
    return {
        "accepted": accepted,
        "final_index": extra.get("final_index"),
        "error": error,
        "rejected": [
            {"index": r["index"], "code": r["code"], "extra": r.get("extra") or {}}
            for r in extra.get("rejected") or []
        ],
    }


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance import round_driver, runtime_policy

    adapters = {
        name: runtime_policy.agent_adapters(rt, p["policy"], "main", manifest=p["manifest"])
        for name, p in POLICIES.items()
    }
    cases = []
    for case in generate():
        if case["kind"] == "round":
            rows = round_driver.drive_round(
                rt, adapters[case["policy"]], case["round"], case["multi_action_mode"]
            )
            answer: Any = [rounds.answer_from_rows(attempt) for attempt in rows]
        else:
            answer = asyncio.run(_runtime_bundle(rt, adapters[case["policy"]], case))
        cases.append(
            {
                "id": case["id"],
                "input": {k: v for k, v in case.items() if k != "id"},
                "runtime": answer,
            }
        )
    return cases


def predict(case: dict[str, Any]) -> Any:
    from engine.round.backstop import backstop
    from engine.round.dryrun import dry_run, parse_round_spec
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_agent
    from engine.traits.round_policy import RoundPolicy

    entry = POLICIES[case["policy"]]
    resolution = resolve_agent(entry["policy"], "main", parse_manifest(entry["manifest"]))
    if case["kind"] == "round":
        spec = parse_round_spec(case["round"])
        return rounds.project(
            dry_run(spec, resolution, multi_action_mode=case["multi_action_mode"])
        )
    bundle = parse_round_spec({"turn_id": "t", "iteration": 0, "actions": case["bundle"]})
    result = backstop(
        bundle.attempts[0],
        RoundPolicy.of(resolution.tools),
        max_actions=case["max_actions"],
        exec_code_complete=case["exec_code_complete"],
    )
    return {
        "accepted": result.accepted,
        "final_index": result.final_index,
        "error": result.error,
        "rejected": [
            {"index": index, "code": code, "extra": extra}
            for index, (code, extra) in result.rejected.items()
        ],
    }
