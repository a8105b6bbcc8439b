"""Complete exec code and Python's set order (issue 37 §5, DESIGN §7 "Complete exec code").

With the decision's code channel complete (``allow_single_exec_with_code``) a bundle's one
code-execution call stays, and the runtime walks its contract files as a **set** when it looks for
a same-file collision: with two of them written by other actions, which it names (and what the
call claims before it) changes with the process's string hashes. Each seeded bundle here (the
``files`` policies; a code-execution call whose contract names two files from a small pool, and
writers and renderers of the same pool around it) is given to the runtime's
``_prepare_safe_multi_action_bundle`` in one child process per ``PYTHONHASHSEED`` of ``SEEDS``;
the runtime's answer is the set of distinct answers over the seeds and whether there was more
than one. Traitdeck's: ``order_dependent`` of :func:`engine.round.backstop.backstop`
(``set_order_files``) and its answers over every order of the contract — the one it predicts,
walking the contract in order, is among them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
from typing import Any

from conformance.families.files import EXEC, POLICIES, RENDERERS

NAME = "setorder"
MIN_CASES = 60
SEED = 20261207
CASES = 90
#: The hash seeds the runtime runs under (two contract files: both orders are all but certain).
SEEDS = range(24)
POOL = ["a.md", "A.md", "b.md", "c.md", "/b.md"]


def _writer(rng: random.Random) -> dict[str, Any]:
    path = rng.choice(POOL)
    if rng.random() < 0.7:
        params = {"path": path, "channel": "canvas", "content": "text", "kind": "display"}
        return {"action": "call_tool", "tool_id": "react.write", "params": params}
    params = {"path": path, "content": "# plain"}
    return {"action": "call_tool", "tool_id": rng.choice(RENDERERS), "params": params}


def generate() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    out = []
    for n in range(CASES):
        first, second = rng.sample(POOL, 2)
        contract = [{"name": "p", "filename": first}, {"name": "q", "filename": second}]
        if rng.random() < 0.3:
            contract.append({"name": "u", "filename": f"unique_{n}.txt"})
        size = rng.choice([2, 3, 3, 4])
        bundle = [_writer(rng) for _ in range(size - 1)]
        execute = {"action": "call_tool", "tool_id": EXEC, "params": {"contract": contract}}
        bundle.insert(rng.randrange(size), execute)
        out.append(
            {
                "id": f"setorder-{n}",
                "policy": rng.choice(list(POLICIES)),
                "bundle": bundle,
                "max_actions": 4,
                "exec_code_complete": rng.random() < 0.9,
            }
        )
    return out


def _child(seed: int) -> list[Any]:
    """In a child process started with ``PYTHONHASHSEED=seed``: the runtime's answer per case."""
    from conformance import harness, runtime_policy
    from conformance.families.files import _runtime_bundle

    del seed
    rt = harness.load(harness.source_path())
    adapters = {
        name: runtime_policy.agent_adapters(rt, p["policy"], "main", manifest=p["manifest"])
        for name, p in POLICIES.items()
    }
    return [asyncio.run(_runtime_bundle(rt, adapters[c["policy"]], c)) for c in generate()]


def record(rt: Any) -> list[dict[str, Any]]:
    del rt  # each seed needs a process of its own
    per_seed = []
    for seed in SEEDS:
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        proc = subprocess.run(
            [sys.executable, "-m", "conformance.families.setorder", str(seed)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        per_seed.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cases = []
    for number, case in enumerate(generate()):
        answers = sorted({json.dumps(seed[number], sort_keys=True) for seed in per_seed})
        cases.append(
            {
                "id": case["id"],
                "input": {k: v for k, v in case.items() if k != "id"},
                "runtime": {
                    "order_dependent": len(answers) > 1,
                    "answers": [json.loads(a) for a in answers],
                },
            }
        )
    return cases


def _traitdeck(case: dict[str, Any], bundle_json: list[Any]) -> Any:
    from engine.round.backstop import backstop
    from engine.round.dryrun import parse_round_spec
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_agent
    from engine.traits.round_policy import RoundPolicy

    entry = POLICIES[case["policy"]]
    resolution = resolve_agent(entry["policy"], "main", parse_manifest(entry["manifest"]))
    bundle = parse_round_spec({"turn_id": "t", "iteration": 0, "actions": bundle_json})
    return backstop(
        bundle.attempts[0],
        RoundPolicy.of(resolution.tools),
        max_actions=case["max_actions"],
        exec_code_complete=case["exec_code_complete"],
    )


def predict(case: dict[str, Any]) -> Any:
    position = next(i for i, a in enumerate(case["bundle"]) if a.get("tool_id") == EXEC)
    contract = case["bundle"][position]["params"]["contract"]
    answers = set()
    for order in itertools.permutations(contract):
        bundle = [dict(a) for a in case["bundle"]]
        bundle[position] = {**bundle[position], "params": {"contract": list(order)}}
        result = _traitdeck(case, bundle)
        answer = {
            "accepted": result.accepted,
            "final_index": result.final_index,
            "error": result.error,
            "rejected": [
                {"index": index, "code": code, "extra": extra}
                for index, (code, extra) in result.rejected.items()
            ],
        }
        answers.add(json.dumps(answer, sort_keys=True))
    as_given = _traitdeck(case, case["bundle"])
    return {
        "order_dependent": bool(as_given.order_dependent),
        "answers": [json.loads(a) for a in sorted(answers)],
    }


if __name__ == "__main__":
    print(json.dumps(_child(int(sys.argv[1]))))
