"""One resolution for every prediction: an agent id as the runtime runs it."""

from __future__ import annotations

from typing import Any

from engine.document.diagnostics import Severity
from engine.tools.agent_run import agent_run

PY: dict[str, Any] = {
    "kind": "python",
    "alias": "t",
    "ref": "t.py",
    "allowed": ["a"],
    "tool_traits": {"a": {"strategy": ["exploration"]}},
}


def _ids(run: Any) -> list[str]:
    return [tool.tool_id for tool in run.resolution.listing if not tool.builtin]


def test_it_runs_an_unnamed_agent_with_mains_tools_and_says_so() -> None:
    data = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": [PY]}}}}}
    run = agent_run(data, "helper")
    assert (run.named, run.resolved_agent, _ids(run)) == (False, "main", ["t.a"])
    (info,) = run.diagnostics
    assert (info.severity, info.code) == (Severity.INFO, "agent-resolved")
    assert "runs agent 'helper' with agent 'main''s tools" in info.message


def test_a_named_agent_needs_no_word() -> None:
    data = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": [PY]}}}}}
    run = agent_run(data, "main")
    assert (run.named, run.resolved_agent, run.diagnostics) == (True, "main", ())


def test_the_legacy_shape_gives_its_default_agents_tools() -> None:
    data = {"tools": {"agents": {"default_agent": [PY]}}}
    run = agent_run(data, "helper")
    assert run.resolved_agent == "default_agent"
    tool = run.resolution.find("t.a")
    assert tool is not None
    assert tool.strategy == ("exploration",)


def test_the_legacy_shape_never_falls_back_to_main() -> None:
    # tool_config._legacy_agent_keys tries the id, default_agent and default: not main.
    data = {"tools": {"agents": {"main": [PY]}}}
    run = agent_run(data, "helper")
    assert (run.resolved_agent, _ids(run)) == (None, [])
    assert "built-in tools only" in run.diagnostics[0].message
    assert agent_run(data, "main").resolved_agent == "main"
