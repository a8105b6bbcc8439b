"""KDCube's own example descriptors through Traitdeck's front doors: ``traitdeck validate`` claims
nothing about the runtime that the recorded answers contradict, and ``traitdeck export`` writes a
one-trait change back as one changed line with every comment kept."""

from __future__ import annotations

import copy
import difflib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from conformance import fixtures
from conformance.families.bundles import INPUTS, UNNAMED_AGENT
from policy.cli import run
from policy.domain.descriptor_write import export_into_descriptor
from policy.domain.descriptors import read_policy_text
from policy.domain.yaml_io import CLI_MAX_BYTES

EXAMPLES = sorted(INPUTS.glob("*.yaml"))
CASES = fixtures.read("bundles")["cases"]


def _recorded(name: str) -> tuple[dict[str, Any], dict[tuple[str, str], list[dict[str, Any]]]]:
    loader = next(c["runtime"] for c in CASES if c["id"] == f"loader-{name}")
    agents = {
        (c["input"]["bundle"], c["input"]["agent"]): c["runtime"]
        for c in CASES
        if c["input"]["kind"] == "agent" and c["input"].get("file") == name
    }
    return loader, agents


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_it_stores_every_example_with_the_runtime_commit_and_licence() -> None:
    assert len(EXAMPLES) == 6
    assert "MIT License" in (INPUTS / "LICENSE").read_text()
    commit = fixtures.read("bundles")["runtime"]["commit"]
    assert commit in (INPUTS / "README.md").read_text()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_validate_claims_nothing_the_runtime_contradicts(path: Path) -> None:
    loader, agents = _recorded(path.name)
    with_policy = [
        bid for bid, owned in loader.items() if any(v is not None for v in owned.values())
    ]
    code, out, err = _cli("validate", "--format", "json", str(path))
    if not with_policy:
        # The runtime's store reads no agents from any bundle: saying so is the true answer.
        assert code == 2
        assert "no bundle of the descriptor carries a policy" in err
        return
    assert code == 0, err
    report = json.loads(out)
    assert report["summary"]["errors"] == 0
    (bundle,) = with_policy
    tools = {
        agent: {tool["id"]: tool for tool in listing} for (bid, agent), listing in agents.items()
    }
    builtin = {tid for tid in tools[UNNAMED_AGENT] if tid.startswith("react.")}
    for diagnostic in report["diagnostics"]:
        if diagnostic["severity"] != "warning":
            continue
        agent = diagnostic["path"].split(".")[1]
        claim = diagnostic["message"]
        mine = tools[agent]
        if diagnostic["code"] == "strategy-unknown":
            tool_id = claim.split(" ", 1)[0]
            assert "strategy" not in mine[tool_id]["traits"], claim
        elif diagnostic["code"] == "exploitation-unsafe-retry":
            tool_id = claim.split(" ", 1)[0]
            assert "exploitation" in mine[tool_id]["traits"]["strategy"], claim
        elif diagnostic["code"] == "agent-fallback":
            # "reads no agent at all, so it offers only the built-in tools"
            assert set(mine) == builtin, claim
        elif diagnostic["code"] == "connection-unloadable":
            # The ReAct loader skips a python connection without module/ref: none of its tools.
            data = read_policy_text(path.read_bytes(), max_bytes=CLI_MAX_BYTES).loaded.data
            index = int(diagnostic["path"].rsplit("[", 1)[1].rstrip("]"))
            connection = data["surfaces"]["as_consumer"]["agents"][agent]["tools"][index]
            alias = connection.get("alias") or connection.get("name")
            assert not [t for t in mine if t.startswith(f"{alias}.")], claim
        else:
            pytest.fail(f"a warning whose claim this test does not check yet: {diagnostic}")
    assert bundle


def _change_one_trait(policy: dict[str, Any]) -> bool:
    """Turn the first strategy list found into another, or add a trait to the first connection
    with an allowed list: what an admin does in the editor."""

    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            traits = node.get("tool_traits")
            if isinstance(traits, dict):
                for entry in traits.values():
                    if isinstance(entry, dict) and "strategy" in entry:
                        entry["strategy"] = (
                            ["neutral"] if entry["strategy"] != ["neutral"] else ["exploration"]
                        )
                        return True
            return any(walk(value) for value in node.values())
        return isinstance(node, list) and any(walk(item) for item in node)

    if walk(policy):
        return True
    for connection in policy["surfaces"]["as_consumer"]["agents"]["lg-react"]["tools"]:
        connection["tool_traits"] = {connection["allowed"][0]: {"strategy": ["exploration"]}}
        return True
    return False


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_export_writes_one_trait_change_as_one_line_and_keeps_every_comment(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    code, out, _ = _cli("fmt", str(path))
    if code == 2:  # no bundle carries a policy: one is created in its config
        policy = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}}
        written = export_into_descriptor(text, policy).text
        removed = [
            line
            for line in difflib.unified_diff(text.splitlines(), written.splitlines(), n=0)
            if line.startswith("-") and not line.startswith("---")
        ]
        assert removed == []  # only the new lines of config.surfaces.as_consumer
        assert (
            read_policy_text(written).loaded.data["surfaces"]["as_consumer"]
            == (policy["surfaces"]["as_consumer"])
        )
        return
    assert export_into_descriptor(text, read_policy_text(text).loaded.data).text == text
    policy = copy.deepcopy(read_policy_text(text).loaded.data)
    assert _change_one_trait(policy)
    written = export_into_descriptor(text, policy).text
    changed = [
        line
        for line in difflib.unified_diff(text.splitlines(), written.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert 1 <= len(changed) <= 2, changed
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert comments == [line for line in written.splitlines() if line.lstrip().startswith("#")]
    assert read_policy_text(written).loaded.data == policy
