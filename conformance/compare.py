"""Traitdeck against the recorded fixtures: the agreement table (cases and agreements per family).
Runs in the project's environment, without the runtime present."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from conformance import fixtures
from conformance.families import families


@dataclass
class Agreement:
    family: str
    commit: str
    cases: int = 0
    agreements: int = 0
    disagreements: list[dict[str, Any]] = field(default_factory=list)


def compare_family(module: Any) -> Agreement:
    data = fixtures.read(module.NAME)
    result = Agreement(module.NAME, data["runtime"]["commit"])
    for case in data["cases"]:
        result.cases += 1
        try:
            got = json.loads(json.dumps(module.predict(case["input"])))
        except Exception as exc:  # a crash on one case is a disagreement, not the end of the table
            got = {"error": f"{type(exc).__name__}: {exc}"}
        if got == case["runtime"]:
            result.agreements += 1
        else:
            result.disagreements.append(
                {"id": case["id"], "runtime": case["runtime"], "traitdeck": got}
            )
    return result


def table(results: list[Agreement]) -> str:
    lines = [f"{'family':<10} {'cases':>6} {'agree':>6}  runtime commit"]
    for r in results:
        lines.append(f"{r.family:<10} {r.cases:>6} {r.agreements:>6}  {r.commit}")
    total = sum(r.cases for r in results)
    agree = sum(r.agreements for r in results)
    lines.append(f"{'total':<10} {total:>6} {agree:>6}  ({100.0 * agree / max(total, 1):.1f} %)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = [a for a in argv if not a.startswith("-")]
    results = [
        compare_family(m)
        for m in families()
        if fixtures.path_for(m.NAME).exists() and (not names or m.NAME in names)
    ]
    print(table(results))
    for r in results:
        for d in r.disagreements[: 3 if "-v" not in argv else None]:
            print(f"\n{r.family} {d['id']}")
            print(f"  runtime:   {json.dumps(d['runtime'])}")
            print(f"  traitdeck: {json.dumps(d['traitdeck'])}")
    return 0 if all(r.cases == r.agreements for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
