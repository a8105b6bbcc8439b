from __future__ import annotations

from typing import Any

import pytest

from engine.document.diagnostics import Severity
from engine.tools.resolution import resolve_agent
from engine.traits.execution_design import ExecutionDesign, parse_design, timeout_message
from tests.policy.domain.policy_text import EARLY_FLOW, check, doc, none_of, only, position, where


def jobs(traits: str, design: str) -> str:
    """One python connection ``jobs`` offering ``run``, with the given flow mappings."""
    return doc(
        f"""
        - ref: t.py
          alias: jobs
          allowed: [run]
          tool_traits:
            run: {traits}
          tool_execution:
            run: {design}
        """
    )


# --- parsing --------------------------------------------------------------------------------------


def test_it_parses_a_complete_design_into_typed_fields() -> None:
    design, problems = parse_design(
        {
            "timeout_s": 20,
            "mode": "async_job",
            "retry": "idempotency_key",
            "confirm": False,
            "async_alternative": "start_export",
            "status_tool": "check_job_status",
            "compensation": "delete_report",
            "owner": "team-a",
        }
    )
    assert problems == []
    assert design == ExecutionDesign(
        timeout_s=20.0,
        mode="async_job",
        retry="idempotency_key",
        confirm=False,
        async_alternative="start_export",
        status_tool="check_job_status",
        compensation="delete_report",
        extra={"owner": "team-a"},
    )
    assert design.has_retry_story is True
    assert design.gated is False


def test_an_unset_mode_is_synchronous() -> None:
    assert parse_design({}) == (ExecutionDesign(), [])
    assert ExecutionDesign().effective_mode == "sync"
    assert parse_design("not a mapping") == (ExecutionDesign(), [])


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -5}, "timeout_s"),
        ({"timeout_s": "20"}, "timeout_s"),
        ({"timeout_s": True}, "timeout_s"),
        ({"timeout_s": float("inf")}, "timeout_s"),
        ({"mode": "batch"}, "mode"),
        ({"mode": "Sync"}, "mode"),
        ({"retry": "maybe"}, "retry"),
        ({"confirm": "yes"}, "confirm"),
        ({"status_tool": ""}, "status_tool"),
        ({"compensation": 3}, "compensation"),
    ],
)
def test_a_wrong_value_is_a_problem_and_counts_as_unset(raw: dict[str, Any], field: str) -> None:
    design, problems = parse_design(raw)
    assert [problem.field for problem in problems] == [field]
    assert getattr(design, field) is None


def test_a_timeout_message_names_the_limit_and_the_async_alternative() -> None:
    design = ExecutionDesign(timeout_s=20, async_alternative="start_export")
    assert timeout_message("jobs.export", design, elapsed_s=20.5) == (
        "jobs.export timed out after 20.5 s (limit 20 s); the call may be retried. "
        "For long work use the async alternative start_export."
    )
    assert "async" not in timeout_message("jobs.export", ExecutionDesign(timeout_s=3))


# --- resolution -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["click", "browser.click", "mcp.browser.click"])
def test_a_tool_carries_its_design_and_mcp_keys_are_qualified(key: str) -> None:
    data = {
        "surfaces": {
            "as_consumer": {
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "mcp",
                                "server_id": "browser",
                                "alias": "browser",
                                "allowed": ["click", "close"],
                                "tool_execution": {key: {"timeout_s": 4, "mode": "sync"}},
                            }
                        ]
                    }
                }
            }
        }
    }
    resolution = resolve_agent(data, "main")
    click = resolution.find("mcp.browser.click")
    close = resolution.find("mcp.browser.close")
    assert click is not None
    assert close is not None
    assert dict(click.execution_design) == {"timeout_s": 4, "mode": "sync"}
    assert click.design.timeout_s == 4.0
    assert dict(close.execution_design) == {}


# --- diagnostics ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("design", "field", "needle"),
    [
        ("{timeout_s: 0, retry: dedup}", "timeout_s", "0,"),
        ("{timeout_s: -1, retry: dedup}", "timeout_s", "-1"),
        ("{timeout_s: 5, mode: batch, retry: dedup}", "mode", "batch"),
        ("{timeout_s: 5, retry: sometimes}", "retry", "sometimes"),
        ("{timeout_s: 5, retry: dedup, confirm: maybe}", "confirm", "maybe"),
    ],
)
def test_it_reports_a_wrong_design_value_at_the_value(design: str, field: str, needle: str) -> None:
    text = jobs("{strategy: [exploration]}", design)
    diagnostic = only(check(text), "execution-design-value")
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.path == f"agents.main.tools[0].tool_execution.run.{field}"
    assert position(diagnostic) == where(text, needle, nth=1)


def test_it_reports_a_design_key_naming_no_tool_at_the_key() -> None:
    text = doc(
        """
        - ref: t.py
          alias: jobs
          allowed: [export_report]
          tool_execution:
            export_reprt: {timeout_s: 5}
        """
    )
    diagnostic = only(check(text), "execution-target-unknown")
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.path == "agents.main.tools[0].tool_execution.export_reprt"
    assert position(diagnostic) == where(text, "export_reprt")
    assert diagnostic.hint == "Did you mean export_report?"


def test_it_warns_about_an_exploitation_tool_with_no_retry_story_at_the_tool() -> None:
    text = doc(
        "- {ref: t.py, alias: jobs, allowed: [pay], tool_traits: {pay: {strategy: exploitation}}}"
    )
    diagnostic = only(check(text), "exploitation-unsafe-retry")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].allowed[0]"
    assert position(diagnostic) == where(text, "pay]")


def test_a_not_safe_retry_without_a_confirmation_gate_is_warned_at_the_retry() -> None:
    text = jobs("{strategy: [exploitation]}", "{timeout_s: 5, retry: not_safe}")
    diagnostic = only(check(text), "exploitation-unsafe-retry")
    assert diagnostic.path == "agents.main.tools[0].tool_execution.run.retry"
    assert position(diagnostic) == where(text, "not_safe")
    assert "not_safe" in diagnostic.message


@pytest.mark.parametrize(
    "design",
    ["{timeout_s: 5, retry: not_safe, confirm: true}", "{timeout_s: 5, retry: idempotency_key}"],
)
def test_a_retry_story_or_a_confirmation_gate_makes_exploitation_safe(design: str) -> None:
    assert none_of(check(jobs("{strategy: [exploitation]}", design)), "exploitation-unsafe-retry")


@pytest.mark.parametrize("mode", ["mode: sync, ", ""])
def test_it_warns_about_a_synchronous_tool_over_thirty_seconds(mode: str) -> None:
    text = jobs("{strategy: [exploration]}", f"{{{mode}timeout_s: 45, retry: dedup}}")
    diagnostic = only(check(text), "sync-too-long")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].tool_execution.run.timeout_s"
    assert position(diagnostic) == where(text, "45")
    assert "async_job" in diagnostic.hint


@pytest.mark.parametrize(
    "design",
    [
        "{timeout_s: 30, mode: sync}",
        "{timeout_s: 300, mode: async_job, status_tool: check_job_status}",
    ],
)
def test_a_bounded_sync_call_or_an_async_job_is_not_too_long(design: str) -> None:
    assert none_of(check(jobs("{strategy: [exploration]}", design)), "sync-too-long")


def test_it_warns_about_an_async_job_without_a_status_tool_at_the_entry() -> None:
    text = jobs("{strategy: [exploration]}", "{timeout_s: 300, mode: async_job}")
    diagnostic = only(check(text), "async-without-status")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].tool_execution.run"
    assert position(diagnostic) == where(text, "run:", nth=2)


def test_it_warns_about_an_early_tool_without_idempotency_at_its_execution() -> None:
    text = doc(
        f"""
        - ref: t.py
          alias: jobs
          allowed: [launch]
          tool_traits:
            launch:
              strategy: [neutral]
              execution: {EARLY_FLOW}
        """
    )
    diagnostic = only(check(text), "early-without-idempotency")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].tool_traits.launch.execution"
    assert position(diagnostic) == where(text, "execution:")


def test_an_early_tool_marked_not_safe_is_warned_at_the_retry_and_a_key_silences_it() -> None:
    text = jobs(
        f"{{strategy: [neutral], execution: {EARLY_FLOW}}}", "{timeout_s: 2, retry: not_safe}"
    )
    diagnostic = only(check(text), "early-without-idempotency")
    assert diagnostic.path == "agents.main.tools[0].tool_execution.run.retry"
    assert position(diagnostic) == where(text, "not_safe")
    quiet = text.replace("not_safe", "idempotency_key")
    assert none_of(check(quiet), "early-without-idempotency")


def test_it_informs_about_a_missing_timeout_at_the_entry_or_the_tool() -> None:
    text = jobs("{strategy: [exploration]}", "{mode: sync}")
    diagnostic = only(check(text), "timeout-missing")
    assert diagnostic.severity is Severity.INFO
    assert diagnostic.path == "agents.main.tools[0].tool_execution.run"
    assert position(diagnostic) == where(text, "run:", nth=2)
    bare = doc(
        "- {ref: t.py, alias: jobs, allowed: [run], tool_traits: {run: {strategy: neutral}}}"
    )
    diagnostic = only(check(bare), "timeout-missing")
    assert diagnostic.path == "agents.main.tools[0].allowed[0]"
    assert position(diagnostic) == where(bare, "run]")


def test_it_warns_about_a_design_reference_naming_no_tool() -> None:
    text = jobs(
        "{strategy: [exploration]}",
        "{timeout_s: 5, async_alternative: run_async, compensation: run}",
    )
    diagnostic = only(check(text), "execution-reference-unknown")
    assert diagnostic.path == "agents.main.tools[0].tool_execution.run.async_alternative"
    assert position(diagnostic) == where(text, "run_async")
