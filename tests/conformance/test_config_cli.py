"""The recorded ``config`` family through the CLI's front door, not only the domain function: each
case's policy written to a file, ``traitdeck effective --format json`` and ``traitdeck catalog``
run on it, and what they print compared with what the runtime answered. A refusal at the edge
(an agent id the policy does not name, a legacy shape) cannot hide behind agreement in the core.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from conformance import fixtures
from policy.cli import run
from policy.domain.yaml_io import dump_body

CASES = fixtures.read("config")["cases"]
_CATALOG_ID = re.compile(r"^\[\d+\] (\S+)$")


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def cli_answer(case: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """The config family's answer, read from the CLI's output for the case."""
    policy, manifest = tmp_path / "policy.yaml", tmp_path / "manifest.json"
    policy.write_text(dump_body(case["policy"]), encoding="utf-8")
    manifest.write_text(json.dumps(case["manifest"]), encoding="utf-8")
    common = ["--agent", case["agent"], "--role", case["role"] or "none", "--manifest"]
    code, out, err = _cli("effective", str(policy), *common, str(manifest), "--format", "json")
    assert code in (0, 1), err  # 1: the policy has errors; the output is still the runtime's
    assert out, err
    tools = json.loads(out)["tools"]
    code, text, err = _cli("catalog", str(policy), *common, str(manifest))
    listing = [m.group(1) for line in text.splitlines() if (m := _CATALOG_ID.match(line))]
    return [
        {
            "id": tool_id,
            "traits": tools[tool_id]["traits"],
            "overrides": tools[tool_id].get("namespace_overrides", {}),
            "namespaces": tools[tool_id].get("namespaces_applicable", []),
        }
        for tool_id in listing
    ]


def _has_agents(policy: Any) -> bool:
    surfaces = policy.get("surfaces") if isinstance(policy, dict) else None
    consumer = surfaces.get("as_consumer") if isinstance(surfaces, dict) else None
    tools = policy.get("tools") if isinstance(policy, dict) else None
    legacy = tools.get("agents") if isinstance(tools, dict) else None
    return isinstance(consumer, dict) and "agents" in consumer or isinstance(legacy, dict)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_cli_answers_what_the_runtime_answered(case: dict[str, Any], tmp_path: Path) -> None:
    given = case["input"]
    if not _has_agents(given["policy"]):
        # DESIGN §6 refuses text that holds no agents at all; its claim must be true: the
        # runtime offers no configured tool for it, only its built-ins.
        policy = tmp_path / "policy.yaml"
        policy.write_text(dump_body(given["policy"]), encoding="utf-8")
        code, out, err = _cli("effective", str(policy), "--agent", given["agent"])
        assert (code, out) == (1, "")
        assert "[shape]" in err
        assert all(tool["id"].startswith("react.") for tool in case["runtime"])
        return
    assert cli_answer(given, tmp_path) == json.loads(json.dumps(case["runtime"]))
