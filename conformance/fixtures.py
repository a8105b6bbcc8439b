"""Reading and writing the recorded fixtures (``tests/conformance/fixtures/<family>.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "conformance" / "fixtures"
RUNTIME_REPO = "kdcube/kdcube-ai-app"


def path_for(name: str) -> Path:
    return FIXTURES / f"{name}.json"


def write(
    name: str, commit: str, cases: list[dict[str, Any]], *, notice: str | None = None
) -> Path:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    path = path_for(name)
    body: dict[str, Any] = {
        "family": name,
        "runtime": {"repository": RUNTIME_REPO, "commit": commit},
        "cases": cases,
    }
    if notice:
        body["notice"] = notice
    # One case per line: a re-recording shows up in a diff as the cases that changed.
    head = json.dumps({k: v for k, v in body.items() if k != "cases"}, sort_keys=True)
    # Inputs keep their mapping order: the runtime reads some of it (react.write params).
    lines = [json.dumps(case, ensure_ascii=False) for case in cases]
    text = head[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n"
    path.write_text(text)
    return path


def read(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path_for(name).read_text())
    return data
