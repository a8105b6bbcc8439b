"""The configuration examples of the tool-traits blog post (seed 000) are valid policy."""

from __future__ import annotations

import textwrap

import pytest

from engine.document.diagnostics import Diagnostic, Severity
from engine.tools.resolution import resolve_agent
from policy.domain.validation.validate import validate_policy
from policy.domain.yaml_io import load_policy

# Verbatim from the post ("Configure traits per agent connection").
WORKSPACE_JOBS = """
- id: workspace_jobs
  kind: python
  ref: tools/workspace_jobs.py
  alias: workspace_jobs
  allowed:
    - search
    - export_report
    - launch_background_job
  tool_traits:
    search:
      strategy: [exploration]
    export_report:
      strategy: [exploitation]
    launch_background_job:
      strategy: [neutral]
      execution:
        trigger: tool_call_complete
        concurrency: parallel_with_generation
        result_dependency: detached
        replay: at_most_once_per_round
"""

BROWSER = """
- id: browser
  kind: mcp
  server_id: browser
  alias: browser
  allowed: [open_page, click, close]
  tool_traits:
    open_page:
      strategy: [exploration]
    click:
      strategy: [exploration, exploitation]
    close:
      strategy: [neutral]
"""

TASK_SERVICE = """
- id: task_service
  kind: named_service
  alias: named_services
  namespaces:
    task:
      allowed:
        - provider.about
        - object.search
        - object.schema
        - object.upsert
  tool_traits:
    provider_about:
      strategy: [exploration]
    search_objects:
      strategy: [exploration]
    object_schema:
      strategy: [exploration]
    upsert_object:
      strategy: [exploitation]
"""

HEAD = "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools:\n"


def doc(*examples: str) -> str:
    body = "".join(textwrap.dedent(example).lstrip("\n") for example in examples)
    return HEAD + textwrap.indent(body, " " * 10)


def check(text: str) -> list[Diagnostic]:
    loaded = load_policy(text)
    assert loaded.diagnostics == []
    return validate_policy(loaded.data, loaded.source)


def warnings(diagnostics: list[Diagnostic]) -> list[tuple[str, str]]:
    return [(d.code, d.path) for d in diagnostics if d.severity is Severity.WARNING]


@pytest.mark.parametrize(
    ("example", "tools", "expected"),
    [
        (
            WORKSPACE_JOBS,
            3,
            [
                ("id-key-ignored", "agents.main.tools[0].id"),
                ("exploitation-unsafe-retry", "agents.main.tools[0].allowed[1]"),
                (
                    "early-without-idempotency",
                    "agents.main.tools[0].tool_traits.launch_background_job.execution",
                ),
            ],
        ),
        (
            BROWSER,
            3,
            [
                ("id-key-ignored", "agents.main.tools[0].id"),
                ("exploitation-unsafe-retry", "agents.main.tools[0].allowed[1]"),
            ],
        ),
        (
            TASK_SERVICE,
            4,
            [
                ("id-key-ignored", "agents.main.tools[0].id"),
                (
                    "exploitation-unsafe-retry",
                    "agents.main.tools[0].namespaces.task.allowed[3]",
                ),
            ],
        ),
    ],
)
def test_each_seed_example_validates_without_errors(
    example: str, tools: int, expected: list[tuple[str, str]]
) -> None:
    diagnostics = check(doc(example))
    assert [d for d in diagnostics if d.severity is Severity.ERROR] == []
    assert warnings(diagnostics) == expected
    infos = [d.code for d in diagnostics if d.severity is Severity.INFO]
    # The seeds declare no instruction profile: multi-action stays at the runtime's default, off.
    assert infos == ["timeout-missing"] * tools + ["multi-action-off"]


def test_the_three_seed_examples_together_validate_without_errors() -> None:
    text = doc(WORKSPACE_JOBS, BROWSER, TASK_SERVICE)
    diagnostics = check(text)
    assert [d.as_text() for d in diagnostics if d.severity is Severity.ERROR] == []
    ignored = [d for d in diagnostics if d.code == "id-key-ignored"]
    assert [d.path for d in ignored] == [
        "agents.main.tools[0].id",
        "agents.main.tools[1].id",
        "agents.main.tools[2].id",
    ]
    assert [d.line for d in ignored] == [
        i + 1 for i, line in enumerate(text.splitlines()) if line.strip().startswith("- id:")
    ]
    assert "alias-duplicate" not in {d.code for d in diagnostics}


def test_the_seed_examples_resolve_to_the_ids_and_traits_the_post_describes() -> None:
    loaded = load_policy(doc(WORKSPACE_JOBS, BROWSER, TASK_SERVICE))
    resolution = resolve_agent(loaded.data, "main")
    configured = {t.tool_id: t.strategy for t in resolution.tools if not t.builtin}
    assert configured == {
        "workspace_jobs.search": ("exploration",),
        "workspace_jobs.export_report": ("exploitation",),
        "workspace_jobs.launch_background_job": ("neutral",),
        "mcp.browser.open_page": ("exploration",),
        "mcp.browser.click": ("exploration", "exploitation"),
        "mcp.browser.close": ("neutral",),
        "named_services.provider_about": ("exploration",),
        "named_services.search_objects": ("exploration",),
        "named_services.object_schema": ("exploration",),
        "named_services.upsert_object": ("exploitation",),
    }
    early = [t.tool_id for t in resolution.tools if t.early]
    assert early == ["workspace_jobs.launch_background_job", "react.delegate"]
