"""The ``traitdeck`` commands on KDCube bundles descriptors: ``--bundle``, exit codes, export."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from policy.cli import run

DESCRIPTOR = """\
bundles:
  version: "1"
  items:
    - id: "site@1"
      config: {ui: {}}
    - id: "agent@1"
      config:
        surfaces:
          as_consumer:
            agents:
              main:
                tools:
                  # the job runner
                  - {kind: python, alias: t, ref: t.py, allowed: [a],
                     tool_traits: {a: {strategy: [exploration]}}}
"""
TWO = (
    DESCRIPTOR
    + """\
    - id: "other@1"
      config:
        tools: {agents: {default_agent: []}}
"""
)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name, text in {"one.yaml": DESCRIPTOR, "two.yaml": TWO}.items():
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    return paths


def test_every_command_reads_the_only_bundle_with_a_policy(files: dict[str, Path]) -> None:
    code, out, _ = _cli("validate", str(files["one.yaml"]))
    assert code == 0
    code, out, _ = _cli("catalog", str(files["one.yaml"]), "--agent", "main", "--no-builtins")
    assert (code, out.splitlines()[0]) == (0, "[1] t.a")


@pytest.mark.parametrize("command", ["validate", "effective", "catalog", "fmt"])
def test_several_bundles_and_none_named_exit_2_naming_them(
    command: str, files: dict[str, Path]
) -> None:
    extra = ["--agent", "main"] if command in {"effective", "catalog"} else []
    code, out, err = _cli(command, str(files["two.yaml"]), *extra)
    assert (code, out) == (2, "")
    assert "agent@1, other@1" in err
    assert len(err.splitlines()) == 1


def test_an_unknown_bundle_exits_1_with_the_bundles_that_carry_a_policy(
    files: dict[str, Path],
) -> None:
    code, _, err = _cli("validate", str(files["two.yaml"]), "--bundle", "site@1")
    assert code == 1
    assert "(bundles with one: agent@1, other@1)" in err


def test_diagnostics_point_into_the_descriptor(files: dict[str, Path]) -> None:
    code, out, _ = _cli(
        "validate", str(files["two.yaml"]), "--bundle", "agent@1", "--format", "json"
    )
    assert code == 0
    lines = {d["code"]: d["line"] for d in json.loads(out)["diagnostics"]}
    assert lines["timeout-missing"] == 14  # the `allowed: [a]` line of the descriptor


def test_replay_reads_each_side_from_its_own_bundle(files: dict[str, Path], tmp_path: Path) -> None:
    rounds = tmp_path / "rounds.jsonl"
    round_ = {"agent": "main", "turn_id": "t", "iteration": 0, "actions": []}
    rounds.write_text(json.dumps(round_) + "\n")
    argv = ["replay", str(files["two.yaml"]), "--bundle", "agent@1", "--rounds", str(rounds)]
    code, out, err = _cli(*argv, "--against", str(files["two.yaml"]))
    assert code == 2  # the baseline descriptor has two bundles with a policy
    assert str(files["two.yaml"]) in err
    code, out, err = _cli(*argv, "--against", str(files["two.yaml"]), "--against-bundle", "other@1")
    assert code == 0, err


def test_export_prints_the_descriptor_with_the_policy_written_in(
    files: dict[str, Path], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "surfaces: {as_consumer: {agents: {main: {tools: [{kind: python, alias: t, ref: t.py,"
        " allowed: [a], tool_traits: {a: {strategy: [neutral]}}}]}}}}\n"
    )
    code, out, err = _cli("export", str(policy), "--into", str(files["one.yaml"]))
    assert code == 0, err
    assert out == DESCRIPTOR.replace("strategy: [exploration]", "strategy: [neutral]")
    code, out, err = _cli("export", str(policy), "--into", str(files["one.yaml"]), "--in-place")
    assert (code, out) == (0, "")
    assert files["one.yaml"].read_text() == DESCRIPTOR.replace("[exploration]", "[neutral]")


def test_export_refuses_a_policy_that_changed_keys_outside_its_subtree(
    files: dict[str, Path], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("ui: {x: 1}\nsurfaces: {as_consumer: {agents: {main: {tools: []}}}}\n")
    argv = ["export", str(policy), "--into", str(files["one.yaml"]), "--bundle", "site@1"]
    code, out, err = _cli(*argv, "--in-place")
    assert (code, out) == (1, "")
    assert "[outside-owned]" in err
    assert "ui.x" in err
    assert files["one.yaml"].read_text() == DESCRIPTOR  # nothing was written


def test_replay_json_names_the_agent_each_id_ran_as(files: dict[str, Path], tmp_path: Path) -> None:
    rounds = tmp_path / "rounds.jsonl"
    lines = [
        {"agent": agent, "turn_id": "t", "iteration": 0, "actions": []}
        for agent in ("main", "helper")
    ]
    rounds.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["replay", str(files["one.yaml"]), "--rounds", str(rounds), "--format", "json"]
    code, out, err = _cli(*argv)
    assert code == 0, err
    assert json.loads(out)["resolved_agents"] == {"main": "main", "helper": "main"}
