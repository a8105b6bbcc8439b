"""Load the KDCube runtime from ``KDCUBE_SRC`` (never copied into this repository) and say which
commit it is. Everything the recorder asks the runtime goes through the modules returned here."""

from __future__ import annotations

import copy
import importlib
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from conformance import fixtures, stubs

SDK = "kdcube_ai_app.apps.chat.sdk"

#: The runtime's own unit tests for the modules the recorder drives (they must pass first).
RUNTIME_TESTS = (
    "kdcube_ai_app/apps/chat/sdk/runtime/tests/test_tool_traits.py",
    "kdcube_ai_app/apps/chat/sdk/runtime/tests/test_tool_config.py",
    "kdcube_ai_app/apps/chat/sdk/solutions/react/v3/test_action_overseer.py",
    "kdcube_ai_app/apps/chat/sdk/solutions/react/v3/test_multi_action.py",
    "kdcube_ai_app/apps/chat/sdk/solutions/react/v3/test_early_tool_execution.py",
)


class HarnessError(RuntimeError):
    """The runtime cannot be loaded from the given path."""


@dataclass(frozen=True)
class Runtime:
    src: Path
    commit: str
    traits: ModuleType
    config: ModuleType
    subsystem: ModuleType
    overseer: ModuleType
    early: ModuleType
    solver: ModuleType
    layout: ModuleType
    react_call: ModuleType
    ns_tools: ModuleType
    stream_policy: ModuleType


def source_path() -> Path:
    raw = os.environ.get("KDCUBE_SRC", "").strip()
    if not raw:
        raise HarnessError(
            "KDCUBE_SRC is not set: point it at the runtime's package root "
            "(…/app/ai-app/src/kdcube-ai-app of a kdcube/kdcube-ai-app checkout)"
        )
    path = Path(raw).resolve()
    if not (path / "kdcube_ai_app").is_dir():
        raise HarnessError(f"KDCUBE_SRC={raw} has no kdcube_ai_app package")
    return path


def runtime_commit(src: Path) -> str:
    """The commit of the runtime checkout: ``KDCUBE_COMMIT`` when given (an archive has no .git),
    else ``git rev-parse HEAD`` in the source tree."""
    explicit = os.environ.get("KDCUBE_COMMIT", "").strip()
    if explicit:
        return explicit
    try:
        out = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HarnessError(f"cannot tell the runtime's commit in {src}: set KDCUBE_COMMIT") from exc
    return out.stdout.strip()


def load(src: Path | None = None) -> Runtime:
    src = src or source_path()
    stubs.install(str(src))
    sys.modules.setdefault("conformance", importlib.import_module("conformance"))

    def mod(name: str) -> ModuleType:
        return importlib.import_module(f"{SDK}.{name}")

    return Runtime(
        src=src,
        commit=runtime_commit(src),
        traits=mod("runtime.tool_traits"),
        config=mod("runtime.tool_config"),
        subsystem=mod("runtime.tool_subsystem"),
        overseer=mod("solutions.react.v3.action_overseer"),
        early=mod("solutions.react.v3.early_tool_execution"),
        solver=mod("solutions.react.v3.runtime"),
        layout=mod("solutions.react.layout"),
        react_call=mod("solutions.react.call"),
        ns_tools=mod("solutions.named_services_providers.tools"),
        stream_policy=mod("streaming.stream_policy"),
    )


def decision_of(action: Mapping[str, Any]) -> dict[str, Any]:
    """A Traitdeck round action (``action``, ``tool_id``, ``params``, ``final_answer``, ``notes``)
    as the decision object the runtime parses from the stream."""
    out: dict[str, Any] = {"action": action.get("action")}
    if action.get("tool_id") is not None or "params" in action:
        call: dict[str, Any] = {}
        if action.get("tool_id") is not None:
            call["tool_id"] = action["tool_id"]
        if "params" in action:
            call["params"] = copy.deepcopy(action["params"])
        out["tool_call"] = call
    for key in ("final_answer", "notes"):
        if key in action:
            out[key] = action[key]
    return out


def record_family(name: str, notice: str, record: Callable[[Path], list[dict[str, Any]]]) -> int:
    """``python -m`` of a family recorded outside ``conformance.record``: ``record`` reads the
    runtime at ``KDCUBE_SRC`` (its package root); its cases are written as the family's fixture
    under the runtime's commit. 2 (with the reason) when the runtime is not there."""
    try:
        src = source_path()
        commit = runtime_commit(src)
        cases = record(src)
    except HarnessError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    path = fixtures.write(name, commit, cases, notice=notice)
    print(f"recorded {len(cases):>5} {name} cases -> {path.relative_to(Path.cwd())}")
    return 0
