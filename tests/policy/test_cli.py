"""The ``traitdeck`` CLI as users script against it: real files, a real process, exit codes.

The contract (issue 3, DESIGN §6): 0 done and no errors; 1 the policy has errors, refused text, or
an unknown agent/tool; 2 the command could not run as asked — one line on stderr, no traceback.

Over 500 lines: one file for the one console script, in the order of its commands.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).with_name("traitdeck")

POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - name: workspace_jobs
            kind: python
            ref: tools/workspace_jobs.py
            alias: workspace_jobs
            allowed: [search, export_report, launch_background_job]
            tool_traits:
              search: {strategy: [exploration]}
              launch_background_job:
                strategy: [neutral]
                execution: {trigger: tool_call_complete, concurrency: parallel_with_generation,
                            result_dependency: detached, replay: at_most_once_per_round}
            tool_execution:
              export_report: {timeout_s: 20, mode: sync, retry: idempotency_key}
          - {kind: mcp, server_id: browser, alias: browser, allowed: [open_page, click, close],
             tool_traits: {open_page: {strategy: [exploration]}}}
          - kind: named_service
            alias: named_services
            namespaces:
              task: {allowed: [provider.about, object.search, object.upsert]}
            tool_traits:
              search_objects: {strategy: [exploration]}
              upsert_object: {strategy: [exploitation]}
"""

# `strategy: [bogus]` is a strategy-value error; the rest is sound.
POLICY_WITH_ERRORS = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - {alias: jobs, ref: jobs.py, allowed: [search],
             tool_traits: {search: {strategy: [bogus]}}}
"""

EARLY_PROFILE = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}

REFUSED = {
    "yaml-syntax": "surfaces: [\n",
    "duplicate-key": "surfaces:\n  as_consumer:\n    agents: {}\n  as_consumer: {}\n",
    "no-agents": "surfaces:\n  as_consumer: {}\n",
    "alias-bomb": "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcde", "bcdef", strict=True)
    )
    + "surfaces: {as_consumer: {agents: {}}}\n",
}
REFUSED_CODE = {
    "yaml-syntax": "yaml-syntax",
    "duplicate-key": "duplicate-key",
    "no-agents": "shape",
    "alias-bomb": "yaml-too-large",
}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def traitdeck(*args: str | Path, stdin: str | None = None, cwd: Path | None = None) -> Result:
    command = (
        [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "policy.cli"]
    )
    completed = subprocess.run(
        [*command, *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd or ROOT,
        check=False,
        timeout=60,
    )
    return Result(completed.returncode, completed.stdout, completed.stderr)


def assert_one_line_usage_error(result: Result) -> None:
    assert result.code == 2
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "Traceback" not in result.err


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(POLICY_WITH_ERRORS, encoding="utf-8")
    return path


def write_json(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- validate -------------------------------------------------------------------------------


def test_validate_exits_0_on_a_policy_with_only_warnings(policy: Path) -> None:
    result = traitdeck("validate", policy)
    assert result.code == 0
    assert result.out.splitlines()[-1] == "0 errors, 6 warnings, 9 info"
    assert f"{policy}:10:31: warning [strategy-unknown]" in result.out


def test_validate_exits_1_and_prints_each_error_with_its_line_and_column(broken: Path) -> None:
    result = traitdeck("validate", broken)
    assert result.code == 1
    line = next(x for x in result.out.splitlines() if "[strategy-value]" in x)
    assert line.startswith(f"{broken}:7:48: error [strategy-value]")
    assert "tool_traits.search.strategy[0]" in line
    assert result.out.splitlines()[-1].startswith("1 error,")


@pytest.mark.parametrize(("fixture", "code"), [("policy", 0), ("broken", 1)])
def test_validate_json_prints_diagnostics_and_summary(
    fixture: str, code: int, request: pytest.FixtureRequest
) -> None:
    result = traitdeck("validate", request.getfixturevalue(fixture), "--format", "json")
    assert result.code == code
    data = result.json()
    assert set(data) == {"diagnostics", "summary"}
    assert set(data["summary"]) == {"errors", "warnings", "info"}
    assert data["summary"]["errors"] == code
    for diagnostic in data["diagnostics"]:
        assert set(diagnostic) == {
            "severity",
            "code",
            "path",
            "line",
            "column",
            "message",
            "hint",
        }


def test_validate_reports_a_yaml_syntax_error_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("surfaces:\n  as_consumer: {agents: [}\n", encoding="utf-8")
    result = traitdeck("validate", path, "--format", "json")
    assert result.code == 1
    (diagnostic,) = result.json()["diagnostics"]
    assert diagnostic["code"] == "yaml-syntax"
    assert (diagnostic["line"], diagnostic["column"]) == (2, 26)  # the `}` that closes no list


def test_validate_reads_standard_input_for_a_dash(tmp_path: Path) -> None:
    result = traitdeck("validate", "-", "--format", "json", stdin=POLICY)
    assert result.code == 0
    assert result.json()["summary"]["errors"] == 0


# --- refused text ---------------------------------------------------------------------------

OTHER_COMMANDS = [
    ["fmt"],
    ["effective", "--agent", "main"],
    ["effective", "--agent", "main", "--format", "json"],
    ["catalog", "--agent", "main"],
    ["dry-run", "--agent", "main", "--round", "ROUND"],
]


@pytest.mark.parametrize("kind", REFUSED)
@pytest.mark.parametrize("command", OTHER_COMMANDS, ids=lambda c: " ".join(c[:1] + c[3:4]))
def test_refused_text_prints_diagnostics_on_stderr_nothing_on_stdout_and_exits_1(
    kind: str, command: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "refused.yaml"
    path.write_text(REFUSED[kind], encoding="utf-8")
    round_file = write_json(tmp_path, "r.json", {"turn_id": "t", "iteration": 0, "actions": []})
    args = [str(round_file) if a == "ROUND" else a for a in command]
    result = traitdeck(args[0], path, *args[1:])
    assert result.code == 1
    assert result.out == ""
    assert f"error [{REFUSED_CODE[kind]}]" in result.err
    assert "Traceback" not in result.err


def test_validate_prints_refused_text_diagnostics_on_stdout(tmp_path: Path) -> None:
    path = tmp_path / "refused.yaml"
    path.write_text(REFUSED["duplicate-key"], encoding="utf-8")
    result = traitdeck("validate", path)
    assert result.code == 1
    assert f"{path}:4:3: error [duplicate-key]" in result.out


def test_a_file_that_is_not_utf8_is_refused_not_crashed(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("surfaces: caf\xe9\n".encode("latin-1"))
    result = traitdeck("fmt", path)
    assert result.code == 1
    assert result.out == ""
    assert "[yaml-syntax]" in result.err


# --- exit 1: errors, unknown agent or tool --------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["fmt"], ["effective", "--agent", "main"], ["catalog", "--agent", "main"]],
    ids=lambda c: c[0],
)
def test_a_policy_with_errors_still_prints_its_output_and_exits_1(
    command: list[str], broken: Path
) -> None:
    result = traitdeck(command[0], broken, *command[1:])
    assert result.code == 1
    assert result.out != ""
    assert "has 1 error;" in result.err


def test_dry_run_on_a_policy_with_errors_prints_verdicts_and_exits_1(
    broken: Path, tmp_path: Path
) -> None:
    round_file = write_json(
        tmp_path,
        "r.json",
        {
            "turn_id": "t",
            "iteration": 0,
            "actions": [{"action": "call_tool", "tool_id": "jobs.search"}],
        },
    )
    result = traitdeck("dry-run", broken, "--agent", "main", "--round", round_file)
    assert result.code == 1
    assert result.out.startswith("attempt 1 #0 call_tool jobs.search [unknown]: accepted")


@pytest.mark.parametrize(
    "command",
    [
        ["effective", "--agent", "nobody"],
        ["catalog", "--agent", "nobody"],
        ["dry-run", "--agent", "nobody", "--round", "ROUND"],
    ],
    ids=lambda c: c[0],
)
def test_an_agent_the_policy_does_not_name_runs_with_the_default_agents_tools(
    command: list[str], policy: Path, tmp_path: Path
) -> None:
    # The runtime never refuses an agent id: it falls back to default_agent, main, default
    # (tool_config._agent_keys). The prediction follows it and says so.
    round_file = write_json(tmp_path, "r.json", {"turn_id": "t", "iteration": 0, "actions": []})
    args = [str(round_file) if a == "ROUND" else a for a in command]
    result = traitdeck(args[0], policy, *args[1:])
    assert result.code == 0
    assert "[agent-resolved]" in result.err
    assert "runs agent 'nobody' with agent 'main''s tools" in result.err
    named = traitdeck(args[0], policy, *[a if a != "nobody" else "main" for a in args[1:]])
    assert result.out == named.out


def test_the_json_of_a_prediction_names_the_agent_it_resolved_to(policy: Path) -> None:
    result = traitdeck("effective", policy, "--agent", "helper", "--format", "json")
    body = json.loads(result.out)
    assert (body["agent"], body["resolved_agent"]) == ("helper", "main")


def test_an_unknown_tool_exits_1_with_one_line(policy: Path) -> None:
    result = traitdeck("catalog", policy, "--agent", "main", "--tool", "mcp.browser.nope")
    assert result.code == 1
    assert result.out == ""
    assert result.err.strip() == "traitdeck: agent 'main' has no tool 'mcp.browser.nope'"


# --- exit 2: the command could not run as asked ----------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus", "policy.yaml"],
        ["validate"],
        ["effective", "policy.yaml"],
        ["validate", "policy.yaml", "--format", "xml"],
        ["validate", "policy.yaml", "--max-bytes", "lots"],
        ["validate", "policy.yaml", "--max-bytes", "0"],
        ["catalog", "policy.yaml", "--agent", "main", "--format", "json"],
        ["dry-run", "policy.yaml", "--agent", "main"],
    ],
    ids=lambda argv: " ".join(argv) or "no arguments",
)
def test_a_usage_error_exits_2_with_one_line_and_no_traceback(
    argv: list[str], policy: Path
) -> None:
    assert_one_line_usage_error(traitdeck(*argv, cwd=policy.parent))


@pytest.mark.parametrize("command", ["validate", "fmt"])
def test_an_unreadable_file_exits_2(command: str, tmp_path: Path) -> None:
    result = traitdeck(command, tmp_path / "missing.yaml")
    assert_one_line_usage_error(result)
    assert "cannot read file" in result.err


def test_a_directory_given_as_the_file_exits_2(tmp_path: Path) -> None:
    assert_one_line_usage_error(traitdeck("validate", tmp_path))


def test_a_file_over_max_bytes_exits_2(policy: Path) -> None:
    result = traitdeck("validate", policy, "--max-bytes", "100")
    assert_one_line_usage_error(result)
    assert "over the limit of 100 bytes" in result.err


def test_max_bytes_at_the_file_size_is_accepted(policy: Path) -> None:
    size = len(POLICY.encode())
    assert traitdeck("validate", policy, "--max-bytes", str(size)).code == 0


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "is malformed: the round must be a JSON object"),
        ('{"turn_id": "t", "iteration": -1, "actions": []}', "is malformed: iteration"),
        ('{"turn_id": "t", "iteration": 0}', "is malformed: the round needs attempts"),
        ('{"turn_id": "t", "iteration": 0, "actions": [{"tool_id": "x"}]}', "actions[0].action"),
        ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
    ],
    ids=["not-json", "a-list", "negative-iteration", "no-actions", "no-action-key", "deep"],
)
def test_a_malformed_round_exits_2(content: str, reason: str, policy: Path, tmp_path: Path) -> None:
    round_file = tmp_path / "r.json"
    round_file.write_text(content, encoding="utf-8")
    result = traitdeck("dry-run", policy, "--agent", "main", "--round", round_file)
    assert_one_line_usage_error(result)
    assert reason in result.err


def test_a_missing_round_file_exits_2(policy: Path, tmp_path: Path) -> None:
    result = traitdeck("dry-run", policy, "--agent", "main", "--round", tmp_path / "nope.json")
    assert_one_line_usage_error(result)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{", "is not valid JSON"),
        ("[1, 2]", "is malformed"),
        ('{"mcp.browser.x": 5}', "is malformed"),
        ('{"mcp.browser.x": {"tool_traits": []}}', "is malformed"),
    ],
    ids=["not-json", "a-list", "entry-not-object", "traits-not-object"],
)
@pytest.mark.parametrize("command", ["validate", "effective"])
def test_a_malformed_manifest_exits_2(
    content: str, reason: str, command: str, policy: Path, tmp_path: Path
) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(content, encoding="utf-8")
    extra = ["--agent", "main"] if command == "effective" else []
    result = traitdeck(command, policy, "--manifest", manifest, *extra)
    assert_one_line_usage_error(result)
    assert reason in result.err


# --- output shapes ----------------------------------------------------------------------------


def test_effective_json_gives_traits_provenance_early_and_execution_design(policy: Path) -> None:
    result = traitdeck("effective", policy, "--agent", "main", "--format", "json")
    assert result.code == 0
    data = result.json()
    assert data["agent"] == "main"
    tools = data["tools"]
    assert list(tools)[:3] == [
        "workspace_jobs.search",
        "workspace_jobs.export_report",
        "workspace_jobs.launch_background_job",
    ]
    assert list(tools)[-1] == "react.delegate"
    assert tools["workspace_jobs.search"] == {
        "traits": {"strategy": ["exploration"]},
        "provenance": {"strategy": "config agents.main.tools[0].tool_traits.search"},
        "early": False,
        "execution_design": {},
    }
    job = tools["workspace_jobs.launch_background_job"]
    assert job["early"] is True
    assert job["traits"]["execution"] == EARLY_PROFILE
    assert tools["workspace_jobs.export_report"]["execution_design"] == {
        "timeout_s": 20,
        "mode": "sync",
        "retry": "idempotency_key",
    }
    assert tools["react.delegate"]["provenance"] == {
        "strategy": "builtin react.delegate",
        "execution": "builtin react.delegate",
    }


def test_effective_takes_the_manifest_layer_below_the_config(policy: Path, tmp_path: Path) -> None:
    manifest = write_json(
        tmp_path,
        "m.json",
        {
            "mcp.browser.click": {"tool_traits": {"strategy": ["exploitation"]}},
            "mcp.browser.open_page": {"tool_traits": {"strategy": ["neutral"], "cost": "low"}},
        },
    )
    result = traitdeck(
        "effective", policy, "--agent", "main", "--manifest", manifest, "--format", "json"
    )
    tools = result.json()["tools"]
    assert tools["mcp.browser.click"]["provenance"] == {"strategy": "manifest mcp.browser.click"}
    assert tools["mcp.browser.open_page"]["traits"] == {"strategy": ["exploration"], "cost": "low"}
    assert tools["mcp.browser.open_page"]["provenance"] == {
        "strategy": "config agents.main.tools[1].tool_traits.open_page",
        "cost": "manifest mcp.browser.open_page",
    }


def test_effective_text_gives_one_line_per_tool_then_its_traits(policy: Path) -> None:
    result = traitdeck("effective", policy, "--agent", "main")
    assert result.code == 0
    lines = result.out.splitlines()
    assert "workspace_jobs.launch_background_job  [neutral]  starts early" in lines
    assert "mcp.browser.click  [unknown]  after generation" in lines
    assert (
        '    strategy: ["exploration"]  (config agents.main.tools[0].tool_traits.search)' in lines
    )


def test_effective_json_spells_yaml_date_and_number_keys_as_text(tmp_path: Path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(
        "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools:\n"
        "          - {alias: w, ref: w.py, allowed: [a],\n"
        "             tool_traits: {a: {strategy: neutral, 2024-01-01: x, 3: {2024-01-02: y}}}}\n",
        encoding="utf-8",
    )
    for fmt in ("json", "text"):
        result = traitdeck("effective", path, "--agent", "main", "--format", fmt)
        assert "Traceback" not in result.err
    tool = traitdeck("effective", path, "--agent", "main", "--format", "json").json()["tools"][
        "w.a"
    ]
    assert tool["traits"] == {"strategy": ["neutral"], "2024-01-01": "x", "3": {"2024-01-02": "y"}}
    assert set(tool["provenance"]) == {"strategy", "2024-01-01", "3"}


def test_catalog_prints_numbered_tools_with_their_scope_blocks(policy: Path) -> None:
    result = traitdeck("catalog", policy, "--agent", "main", "--no-builtins")
    assert result.code == 0
    assert result.out.startswith(
        "[1] workspace_jobs.search\n"
        "   Scope:\n"
        "       \u2022 strategy: exploration\n"
        "\n"
        "[2] workspace_jobs.export_report\n"
        "\n"
        "[3] workspace_jobs.launch_background_job\n"
        "   Scope:\n"
        "       \u2022 strategy: neutral\n"
        "       \u2022 execution: trigger=tool_call_complete, concurrency=parallel_with_generation,"
        " result_dependency=detached, replay=at_most_once_per_round\n"
        "\n"
    )
    assert "react." not in result.out
    assert result.out.count("\n[") == 8  # 9 configured tools


def test_catalog_lists_the_builtins_after_the_configured_tools(policy: Path) -> None:
    out = traitdeck("catalog", policy, "--agent", "main").out
    # A parent agent: nine react tools, then react.delegate (react.contribute is for sub-agents).
    # The runtime order: python and named-service tools, then MCP, then the built-ins.
    assert out.index("[6] named_services.upsert_object") < out.index("[9] mcp.browser.close")
    assert out.index("[9] mcp.browser.close") < out.index("[10] react.read")
    assert out.endswith(
        "[19] react.delegate\n   Scope:\n       \u2022 strategy: neutral\n"
        "       \u2022 execution: trigger=tool_call_complete, "
        "concurrency=parallel_with_generation, result_dependency=detached, "
        "replay=at_most_once_per_round\n\n"
    )


def test_catalog_reads_the_form_the_agent_applies_and_says_where_it_comes_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        POLICY + "react:\n  main:\n    instructions: {tool_catalog_detail: compact}\n",
        encoding="utf-8",
    )
    result = traitdeck("catalog", path, "--agent", "main")
    assert result.code == 0
    assert result.out.startswith("[AVAILABLE TOOLS] [COMPACT]\nThis catalog: 19 tools - ")
    assert "- named_services.search_objects [async]\n  namespaces: task\n" in result.out
    assert "Scope:" not in result.out
    assert result.out.endswith("- react.delegate\n")
    assert "reads the compact one by default (react.main.instructions.tool_catalog_detail)" in (
        result.err
    )
    full = traitdeck("catalog", path, "--agent", "main", "--detail", "full")
    assert full.out.startswith("[1] workspace_jobs.search\n   Scope:\n")


def test_catalog_names_the_profile_whose_form_applies(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        POLICY
        + "react:\n  main:\n    instruction_profiles:\n      default: fast\n"
        + "      options: [{id: fast, tool_catalog_detail: compact}]\n",
        encoding="utf-8",
    )
    result = traitdeck("catalog", path, "--agent", "main")
    assert result.out.startswith("[AVAILABLE TOOLS] [COMPACT]\n")
    assert (
        "(react.main.instruction_profiles.options[0].tool_catalog_detail) under its default "
        "instruction profile 'fast'"
    ) in result.err


def test_catalog_says_when_the_model_reads_no_catalog(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        POLICY + "react:\n  main:\n    instructions: {include_tool_catalog: false}\n",
        encoding="utf-8",
    )
    result = traitdeck("catalog", path, "--agent", "main")
    assert result.code == 0
    assert "reads no catalog" in result.err
    assert "react.main.instructions.include_tool_catalog" in result.err


def test_catalog_for_one_tool(policy: Path) -> None:
    result = traitdeck("catalog", policy, "--agent", "main", "--tool", "mcp.browser.open_page")
    assert result.code == 0
    assert (
        result.out
        == "[1] mcp.browser.open_page\n   Scope:\n       \u2022 strategy: exploration\n\n"
    )


DELEGATE_PARAMS = {"charter": "A", "agent_alias": "strong_agent"}


def test_dry_run_json_reproduces_the_ledger_test_vector_and_dedups_a_retry(
    policy: Path, tmp_path: Path
) -> None:
    round_file = write_json(
        tmp_path,
        "r.json",
        {
            "turn_id": "turn-1",
            "iteration": 2,
            "attempts": [
                [
                    {"action": "call_tool", "tool_id": "react.delegate", "params": DELEGATE_PARAMS},
                    {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {}},
                ],
                [
                    {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {}},
                    {"action": "call_tool", "tool_id": "react.delegate", "params": DELEGATE_PARAMS},
                ],
            ],
        },
    )
    result = traitdeck(
        "dry-run",
        policy,
        "--agent",
        "main",
        "--round",
        round_file,
        "--format",
        "json",
        "--multi-action-mode",
        "on",
    )
    assert result.code == 0
    data = result.json()
    assert (data["turn_id"], data["iteration"], data["max_actions"]) == ("turn-1", 2, 2)
    assert data["multi_action_mode"] == "on"
    first, second = (attempt["actions"] for attempt in data["attempts"])
    assert first[0] == {
        "index": 0,
        "action": "call_tool",
        "tool_id": "react.delegate",
        "strategy": ["neutral"],
        "online": {"verdict": "accepted", "code": None, "extra": {}},
        "backstop": None,
        # The first stream was replaced by the retry: only its early start ran.
        "verdict": "dropped",
        "early": True,
        "explanation": (
            "a later attempt re-streamed the round and replaced this stream: only its early "
            "starts ran"
        ),
        "tool_call_id": "tc_5ca55cec48db",
        "fingerprint": "40b78e51de2d48e9f19370949ed7eafe6594198e5a75bc7896e0cd02e0a4681f",
        "ledger": "started",
    }
    assert first[1]["ledger"] is None
    # The retry put search at slot 0, which holds the early delegate call: the runtime treats
    # search as already done (a slot match wins whatever tool it holds) and never runs it.
    assert (second[0]["verdict"], second[0]["ledger"], second[0]["match"]) == (
        "accepted",
        "dedup",
        "slot",
    )
    assert second[1]["ledger"] == "dedup"
    assert second[1]["match"] == "fingerprint"
    assert second[1]["tool_call_id"] == "tc_5ca55cec48db"


def test_dry_run_takes_the_mode_from_the_round_then_the_flag_then_the_setting(
    policy: Path, tmp_path: Path
) -> None:
    actions = [
        {"action": "call_tool", "tool_id": "react.hide", "params": {}},
        {"action": "call_tool", "tool_id": "react.plan", "params": {}},
    ]
    plain = write_json(tmp_path, "plain.json", {"turn_id": "t", "iteration": 0, "actions": actions})
    own = write_json(
        tmp_path,
        "own.json",
        {"turn_id": "t", "iteration": 0, "actions": actions, "multi_action_mode": "off"},
    )

    def mode(round_file: Path, *flags: str) -> str:
        out = traitdeck(
            "dry-run", policy, "--agent", "main", "--round", round_file, "--format", "json", *flags
        )
        return str(out.json()["multi_action_mode"])

    assert mode(plain) == "off"
    assert mode(plain, "--multi-action-mode", " Fanout ") == "on"
    assert mode(plain, "--multi-action-mode", "maybe") == "off"
    assert mode(own, "--multi-action-mode", "on") == "off"


def test_dry_run_reports_a_rejection_with_code_extra_and_words(
    policy: Path, tmp_path: Path
) -> None:
    round_file = write_json(
        tmp_path,
        "r.json",
        {
            "turn_id": "t",
            "iteration": 0,
            "actions": [
                {"action": "call_tool", "tool_id": "mcp.browser.open_page", "params": {}},
                {"action": "call_tool", "tool_id": "named_services.upsert_object", "params": {}},
            ],
        },
    )
    result = traitdeck(
        "dry-run", policy, "--agent", "main", "--round", round_file, "--format", "json"
    )
    rejected = result.json()["attempts"][0]["actions"][1]
    assert rejected["verdict"] == "rejected"
    assert rejected["code"] == "multi_action_bundle_strategy_incompatible"
    # The runtime's own extra, field for field.
    assert rejected["extra"] == {
        "index": 1,
        "tool_id": "named_services.upsert_object",
        "strategy": ["exploitation"],
        "first_index": 0,
        "first_tool_id": "mcp.browser.open_page",
        "first_strategy": ["exploration"],
    }
    assert rejected["online"]["code"] == rejected["code"]
    text = traitdeck("dry-run", policy, "--agent", "main", "--round", round_file).out
    assert text.splitlines()[1].startswith(
        "attempt 1 #1 call_tool named_services.upsert_object [exploitation]: rejected online "
        "(multi_action_bundle_strategy_incompatible): mcp.browser.open_page (exploration) was "
        "accepted first"
    )


def test_dry_run_text_says_when_a_call_starts_early_and_when_it_is_a_dedup(
    policy: Path, tmp_path: Path
) -> None:
    call = {"action": "call_tool", "tool_id": "react.delegate", "params": DELEGATE_PARAMS}
    round_file = write_json(
        tmp_path, "r.json", {"turn_id": "turn-1", "iteration": 2, "attempts": [[call], [call]]}
    )
    result = traitdeck("dry-run", policy, "--agent", "main", "--round", round_file)
    assert result.out.splitlines()[:-1] == [
        "attempt 1 #0 call_tool react.delegate [neutral]: dropped, started early as "
        "tc_5ca55cec48db: a later attempt re-streamed the round and replaced this stream: only "
        "its early starts ran",
        "attempt 2 #0 call_tool react.delegate [neutral]: accepted, dedup: reuses "
        "tc_5ca55cec48db (matched by slot)",
    ]
    assert result.out.splitlines()[-1].startswith(
        "assumed react agent v3 (from the setting TRAITDECK_REACT_AGENT_VERSION): the v3 agent's "
        "overseer rejects"
    )


# --- fmt ----------------------------------------------------------------------------------------


def test_fmt_prints_the_export_with_its_header_and_is_idempotent(
    policy: Path, tmp_path: Path
) -> None:
    first = traitdeck("fmt", policy)
    assert first.code == 0
    header, _, body = first.out.partition("\n# sha256: ")
    assert header == "# traitdeck-format: 1"
    digest, _, body = body.partition("\n")
    assert digest == hashlib.sha256(body.encode()).hexdigest()
    again = tmp_path / "again.yaml"
    again.write_text(first.out, encoding="utf-8")
    second = traitdeck("fmt", again)
    assert second.code == 0
    assert second.out == first.out
    assert yaml.safe_load(body) == yaml.safe_load(POLICY)


def test_fmt_flags_a_hand_edited_export_but_still_formats_it(policy: Path, tmp_path: Path) -> None:
    exported = traitdeck("fmt", policy).out
    edited = tmp_path / "edited.yaml"
    edited.write_text(exported.replace("open_page", "open_tab"), encoding="utf-8")
    result = traitdeck("validate", edited, "--format", "json")
    codes = [d["code"] for d in result.json()["diagnostics"]]
    assert "hash-mismatch" in codes


def test_the_cli_also_runs_as_a_python_module(policy: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "policy.cli", "validate", str(policy), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert completed.returncode == 0
    assert json.loads(completed.stdout)["summary"]["errors"] == 0


@pytest.mark.django_db
def test_fmt_output_equals_the_web_export_bytes_of_the_same_policy(
    policy: Path, admin_client: Any
) -> None:
    from policy.domain.yaml_io import load_policy
    from policy.services import draft_replace

    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    fmt = traitdeck("fmt", policy)
    api = admin_client.get("/api/v1/policy/export.yaml")
    page = admin_client.get("/policy/export.yaml")
    assert api.content == fmt.out.encode("utf-8")
    assert page.content == fmt.out.encode("utf-8")


@pytest.mark.parametrize(
    ("role", "present", "absent"),
    [
        ("parent", "react.delegate", "react.contribute"),
        ("child", "react.contribute", "react.delegate"),
        ("none", None, "react.delegate"),
    ],
)
def test_catalog_lists_the_built_ins_of_the_agents_role(
    policy: Path, role: str, present: str | None, absent: str
) -> None:
    result = traitdeck("catalog", policy, "--agent", "main", "--role", role)
    assert result.code == 0
    ids = [line.split("] ", 1)[1] for line in result.out.splitlines() if line.startswith("[")]
    if present is not None:
        assert present in ids
    assert absent not in ids
    assert "react.contribute" not in ids or role == "child"


def test_an_unknown_role_is_a_usage_error(policy: Path) -> None:
    result = traitdeck("effective", policy, "--agent", "main", "--role", "boss")
    assert result.code == 2
    assert "invalid choice: 'boss'" in result.err


TWO_ACTIONS = [
    {"action": "call_tool", "tool_id": "react.hide", "params": {}},
    {"action": "call_tool", "tool_id": "react.plan", "params": {}},
]


def test_dry_run_assumes_kdcubes_default_v2_where_two_actions_run_nothing(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAITDECK_REACT_AGENT_VERSION")
    round_file = write_json(
        tmp_path, "r.json", {"turn_id": "t", "iteration": 0, "actions": TWO_ACTIONS}
    )
    data = traitdeck(
        "dry-run", policy, "--agent", "main", "--round", round_file, "--format", "json"
    ).json()
    assert data["react_version"] == "v2"
    assert "default" in data["react_version_source"]
    (attempt,) = data["attempts"]
    assert attempt["decision"]["route"] == "decision"
    assert attempt["decision"]["channel_instances"] == 2
    assert [a["verdict"] for a in attempt["actions"]] == ["rejected", "rejected"]
    assert all(a["code"] == "action_schema_error" and not a["early"] for a in attempt["actions"])
    assert "multiple_channel_instances:2" in attempt["actions"][0]["explanation"]
    text = traitdeck("dry-run", policy, "--agent", "main", "--round", round_file).out
    assert text.splitlines()[-1].startswith("assumed react agent v2 (from KDCube's default")
    assert "nothing of this decision runs" in text


def test_dry_run_takes_the_version_from_the_round_then_the_flag_then_the_setting(
    policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = write_json(tmp_path, "p.json", {"turn_id": "t", "iteration": 0, "actions": TWO_ACTIONS})
    own = write_json(
        tmp_path,
        "o.json",
        {"turn_id": "t", "iteration": 0, "actions": TWO_ACTIONS, "react_version": " V3 "},
    )

    def version(round_file: Path, *flags: str) -> tuple[str, str]:
        data = traitdeck(
            "dry-run", policy, "--agent", "main", "--round", round_file, "--format", "json", *flags
        ).json()
        return data["react_version"], data["react_version_source"]

    assert version(own, "--react-version", "v2") == ("v3", "the round's react_version")
    assert version(plain, "--react-version", "v2") == ("v2", "the explicit choice")
    assert version(plain)[0] == "v3"  # the setting the suite pins (tests/conftest.py)
    monkeypatch.setenv("TRAITDECK_REACT_AGENT_VERSION", "v9")
    assert version(plain) == ("v2", "the setting TRAITDECK_REACT_AGENT_VERSION")


def test_dry_run_refuses_a_round_with_an_unknown_react_version(
    policy: Path, tmp_path: Path
) -> None:
    bad = write_json(
        tmp_path,
        "b.json",
        {"turn_id": "t", "iteration": 0, "actions": TWO_ACTIONS, "react_version": "v4"},
    )
    result = traitdeck("dry-run", policy, "--agent", "main", "--round", bad)
    assert_one_line_usage_error(result)
    assert 'react_version must be "v2" or "v3"' in result.err


def test_an_unknown_react_version_setting_is_a_check_deploy_warning(settings: Any) -> None:
    from django.core import checks

    from policy.checks import react_version_setting

    assert react_version_setting in checks.registry.registry.get_checks(
        include_deployment_checks=True
    )
    settings.TRAITDECK_REACT_AGENT_VERSION = "v9"
    [found] = react_version_setting()
    assert found.id == "traitdeck.W001"
    assert found.level == checks.WARNING
    assert "predictions assume v2" in found.msg
    settings.TRAITDECK_REACT_AGENT_VERSION = "V3 "
    assert react_version_setting() == []


def test_effective_json_says_the_catalog_form_and_mode_the_runtime_decides(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        POLICY
        + """
react:
  agents:
    main:
      instructions: {tool_catalog_detail: " Compact "}
      instruction_profiles:
        default: fast
        options:
          - {id: fast, multi_action_mode: safe_fanout, include_tool_catalog: "no"}
""",
        encoding="utf-8",
    )
    data = traitdeck("effective", path, "--agent", "main", "--format", "json").json()
    assert data["instruction_profile"] == "fast"
    assert (data["tool_catalog_detail"], data["tool_catalog_detail_source"]) == (
        "compact",
        "react.agents.main.instructions.tool_catalog_detail",
    )
    assert data["include_tool_catalog"] is False
    assert data["include_tool_catalog_source"] == (
        "react.agents.main.instruction_profiles.options[0].include_tool_catalog"
    )
    assert (data["multi_action_mode"], data["multi_action_mode_effective"]) == ("safe_fanout", "on")
