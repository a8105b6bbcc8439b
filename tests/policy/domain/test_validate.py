"""Validation of a policy: every diagnostic code with the path and line it points at.

Over 500 lines: one file per validator entry point (``validate_policy``), grouped by code.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.document.diagnostics import Diagnostic, Severity
from engine.document.source import SourceMap
from engine.tools.manifest import parse_manifest
from policy.domain.validation.validate import validate_policy
from tests.policy.domain.policy_text import (
    EARLY_FLOW,
    HEAD,
    check,
    codes,
    doc,
    none_of,
    only,
    position,
    where,
)

CLEAN = """
- kind: python
  ref: tools/jobs.py
  alias: jobs
  allowed: [search]
  tool_traits:
    search: {strategy: [exploration]}
  tool_execution:
    search: {timeout_s: 5, mode: sync, retry: natural_key}
"""


def test_it_finds_nothing_in_a_clean_policy() -> None:
    assert [d.code for d in check(doc(CLEAN))] == ["multi-action-off"]


MULTI_ON = """\
react:
  main:
    instruction_profiles:
      default: fanout
      options:
        - {id: fanout, multi_action_mode: safe_fanout}
        - {id: lite, multi_action_mode: "off"}
"""


def test_it_says_what_multi_action_off_means_under_each_react_agent() -> None:
    (note,) = check(doc(CLEAN))
    assert note.severity is Severity.INFO
    assert note.path == "agents.main"
    assert "one action per decision" in note.message
    assert "Under v3 the overseer still checks the strategy order" in note.message
    assert "Under v2 (KDCube's default) there is no overseer" in note.message
    assert "AI_REACT_AGENT_MULTI_ACTION" in note.hint


def test_what_multi_action_off_says_per_react_agent_is_short() -> None:
    """Issue 37: about 400 characters for a reader of one react version (the opening and that
    version's sentences); the detail is in the glossary, which the hint names."""
    (note,) = check(doc(CLEAN))
    opening, rest = note.message.split("Under v3", 1)
    v3, v2 = rest.split("Under v2", 1)
    assert len(opening + "Under v3" + v3) <= 420
    assert len(opening + "Under v2" + v2) <= 420
    assert "glossary" in note.hint


def test_it_stays_quiet_when_the_default_profile_turns_multi_action_on() -> None:
    assert check(MULTI_ON + doc(CLEAN)) == []


def test_it_names_the_profile_that_turns_multi_action_off() -> None:
    text = MULTI_ON.replace("default: fanout", "default: lite") + doc(CLEAN)
    (note,) = check(text)
    assert "multi_action_mode: 'off'" in note.message


# --- shape ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("connections", "path", "needle"),
    [
        ("- just a string", "agents.main.tools[0]", "just a string"),
        (
            "- {ref: t.py, alias: a, allowed: search}",
            "agents.main.tools[0].allowed",
            "search}",
        ),
        (
            "- {ref: t.py, alias: a, allowed: [search, 5]}",
            "agents.main.tools[0].allowed[1]",
            "5]",
        ),
        (
            "- {ref: t.py, alias: a, allowed: [s], tool_traits: [s]}",
            "agents.main.tools[0].tool_traits",
            "[s]}",
        ),
        (
            "- {ref: t.py, alias: a, allowed: [s], tool_traits: {s: [exploration]}}",
            "agents.main.tools[0].tool_traits.s",
            "[exploration]",
        ),
        (
            "- {ref: t.py, alias: a, allowed: [s], tool_traits: {s: {strategy: neutral, "
            "execution: true}}}",
            "agents.main.tools[0].tool_traits.s.execution",
            "true",
        ),
        (
            "- {kind: named_service, namespaces: [task]}",
            "agents.main.tools[0].namespaces",
            "[task]",
        ),
        (
            "- {kind: named_service, namespaces: {task: {allowed: object.get}}}",
            "agents.main.tools[0].namespaces.task.allowed",
            "object.get",
        ),
        (
            "- {kind: mcp, server_id: web, tools: {open: 1}}",
            "agents.main.tools[0].tools",
            "{open",
        ),
        (
            "- {ref: t.py, alias: [a], name: n, allowed: [s]}",
            "agents.main.tools[0].alias",
            "[a]",
        ),
        (
            "- {ref: t.py, alias: a, allowed: [s], tool_execution: [s]}",
            "agents.main.tools[0].tool_execution",
            "[s]}",
        ),
    ],
)
def test_it_reports_a_wrong_type_where_the_runtime_expects_a_list_or_mapping(
    connections: str, path: str, needle: str
) -> None:
    text = doc(connections)
    diagnostic = only(check(text), "shape")
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.path == path
    assert position(diagnostic) == where(text, needle)


def test_it_reports_tools_that_are_not_a_list() -> None:
    text = HEAD.replace("tools:\n", "tools: {a: 1}\n")
    diagnostic = only(check(text), "shape")
    assert (diagnostic.path, position(diagnostic)) == ("agents.main.tools", where(text, "{a: 1}"))


def test_it_reports_an_agent_that_is_not_a_mapping() -> None:
    text = "surfaces:\n  as_consumer:\n    agents:\n      main: [x]\n"
    diagnostic = only(check(text), "shape")
    assert (diagnostic.path, position(diagnostic)) == ("agents.main", where(text, "[x]"))


# --- connections ----------------------------------------------------------------------------------


def test_it_reports_an_unknown_connection_kind_at_the_value() -> None:
    text = doc("- {kind: pyhton, ref: t.py, alias: a, allowed: [s]}")
    diagnostic = only(check(text), "connection-kind")
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.path == "agents.main.tools[0].kind"
    assert position(diagnostic) == where(text, "pyhton")
    assert diagnostic.hint == "Did you mean kind: python?"


@pytest.mark.parametrize(
    ("connections", "words"),
    [
        ("- alias: jobs\n  allowed: [s]", "neither module nor ref"),
        ("- ref: t.py\n  allowed: [s]", "no alias or name"),
        ("- kind: mcp\n  alias: web", "no server_id, server or name"),
        ("- kind: named_service\n  namespaces: {task: {allowed: [object.find]}}", "no namespace"),
        ("- kind: named_service\n  allowed: [object.get]", "no namespace"),
    ],
)
def test_it_reports_a_connection_the_runtime_skips_at_its_first_key(
    connections: str, words: str
) -> None:
    text = doc(connections)
    diagnostic = only(check(text), "connection-unloadable")
    # A python connection without code is skipped by the ReAct loader only: the bundle's own
    # code may still read it (KDCube's ported-langgraph-agents example does).
    python_without_code = words == "neither module nor ref"
    assert diagnostic.severity is (Severity.WARNING if python_without_code else Severity.ERROR)
    assert diagnostic.path == "agents.main.tools[0]"
    first_key = connections.removeprefix("- ").split(":")[0]
    line, column = where(text, f"- {first_key}:")
    assert position(diagnostic) == (line, column + 2)
    assert words in diagnostic.message


def test_it_warns_that_an_id_key_is_not_read() -> None:
    text = doc("- id: workspace_jobs\n  ref: t.py\n  alias: jobs\n  allowed: [search]")
    diagnostic = only(check(text), "id-key-ignored")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].id"
    assert position(diagnostic) == where(text, "id:")
    assert diagnostic.hint == "Remove id: alias already names this connection."


def test_an_id_key_without_alias_suggests_renaming_it() -> None:
    text = doc("- id: jobs\n  ref: t.py\n  allowed: [search]")
    diagnostics = check(text)
    assert codes(diagnostics) == {"id-key-ignored", "connection-unloadable"}
    assert "Rename id to alias" in only(diagnostics, "id-key-ignored").hint


def test_it_warns_about_a_second_connection_with_the_same_alias_at_its_alias_key() -> None:
    text = doc(
        """
        - {ref: a.py, alias: jobs, allowed: [search]}
        - {ref: b.py, alias: jobs, allowed: [export]}
        """
    )
    diagnostic = only(check(text), "alias-duplicate")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[1].alias"
    assert position(diagnostic) == where(text, "alias: jobs", nth=2)
    assert "tools[0]" in diagnostic.message


def test_an_alias_falling_back_to_name_also_counts_as_a_duplicate() -> None:
    text = doc(
        """
        - {kind: named_service, namespaces: {t: {allowed: [object.get]}}}
        - {kind: named_service, namespaces: {u: {allowed: [object.list]}}}
        """
    )
    diagnostic = only(check(text), "alias-duplicate")
    assert diagnostic.path == "agents.main.tools[1]"
    assert position(diagnostic) == where(text, "kind", nth=2)


def test_it_warns_about_an_alias_that_clashes_with_the_builtin_react_connection() -> None:
    text = doc("- {ref: t.py, alias: react, allowed: [read]}")
    diagnostic = only(check(text), "alias-duplicate")
    assert diagnostic.path == "agents.main.tools[0].alias"
    assert "read-only" in diagnostic.message


# --- strategy and execution values ----------------------------------------------------------------


def test_it_reports_each_dropped_strategy_item_at_the_item() -> None:
    text = doc(
        """
        - ref: t.py
          alias: jobs
          allowed: [search]
          tool_traits:
            search: {strategy: [exploration, bogus, 5]}
        """
    )
    found = [d for d in check(text) if d.code == "strategy-value"]
    assert [d.path for d in found] == [
        "agents.main.tools[0].tool_traits.search.strategy[1]",
        "agents.main.tools[0].tool_traits.search.strategy[2]",
    ]
    assert [position(d) for d in found] == [where(text, "bogus"), where(text, "5]")]
    assert all(d.severity is Severity.ERROR for d in found)
    assert "becomes [exploration]" in found[0].message


def test_a_scalar_strategy_value_is_reported_at_the_value_and_says_unknown() -> None:
    text = doc("- {ref: t.py, alias: jobs, allowed: [s], tool_traits: {s: {strategy: explore}}}")
    diagnostic = only(check(text), "strategy-value")
    assert diagnostic.path == "agents.main.tools[0].tool_traits.s.strategy"
    assert position(diagnostic) == where(text, "explore}")
    assert "becomes [unknown]" in diagnostic.message
    assert diagnostic.hint == "Did you mean exploration?"


@pytest.mark.parametrize(("value", "needle"), [("[]", "[]"), ("null", "null"), ('""', '""')])
def test_it_reports_an_empty_strategy(value: str, needle: str) -> None:
    text = doc(
        f"- {{ref: t.py, alias: jobs, allowed: [s], tool_traits: {{s: {{strategy: {value}}}}}}}"
    )
    diagnostics = check(text)
    diagnostic = only(diagnostics, "strategy-empty")
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.path == "agents.main.tools[0].tool_traits.s.strategy"
    assert position(diagnostic) == where(text, needle)
    assert "strategy-unknown" not in codes(diagnostics)  # the error already says so


def test_it_names_the_missing_and_wrong_fields_of_an_incomplete_execution() -> None:
    text = doc(
        """
        - ref: t.py
          alias: jobs
          allowed: [launch]
          tool_traits:
            launch:
              strategy: [neutral]
              execution: {trigger: tool_call_complete, concurrency: sequential}
        """
    )
    diagnostic = only(check(text), "execution-incomplete")
    # The same outcome as execution-inert (the tool runs, never early): the same severity.
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].tool_traits.launch.execution"
    assert position(diagnostic) == where(text, "execution:")
    assert "concurrency is 'sequential'" in diagnostic.message
    assert "result_dependency is missing" in diagnostic.message
    assert "replay is missing" in diagnostic.message


def test_it_warns_that_the_early_profile_is_inert_on_a_non_neutral_tool() -> None:
    text = doc(
        f"""
        - ref: t.py
          alias: jobs
          allowed: [launch]
          tool_traits:
            launch:
              strategy: [neutral, exploration]
              execution: {EARLY_FLOW}
        """
    )
    diagnostic = only(check(text), "execution-inert")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].tool_traits.launch.execution"
    assert position(diagnostic) == where(text, "execution:")
    assert "[neutral, exploration]" in diagnostic.message


def test_it_warns_about_a_tool_with_no_strategy_at_its_allowed_item() -> None:
    text = doc("- {ref: t.py, alias: jobs, allowed: [search, export]}")
    found = [d for d in check(text) if d.code == "strategy-unknown"]
    assert [d.path for d in found] == [
        "agents.main.tools[0].allowed[0]",
        "agents.main.tools[0].allowed[1]",
    ]
    assert [position(d) for d in found] == [where(text, "search"), where(text, "export")]
    assert found[0].severity is Severity.WARNING
    assert "runs alone" in found[0].message


def test_an_explicit_unknown_strategy_is_warned_at_its_value() -> None:
    text = doc("- {ref: t.py, alias: jobs, allowed: [s], tool_traits: {s: {strategy: [unknown]}}}")
    diagnostic = only(check(text), "strategy-unknown")
    assert diagnostic.path == "agents.main.tools[0].tool_traits.s.strategy"
    assert position(diagnostic) == where(text, "[unknown]")


# --- targets --------------------------------------------------------------------------------------


def test_it_reports_an_operation_id_used_as_a_trait_key_and_suggests_the_callable() -> None:
    text = doc(
        """
        - kind: named_service
          namespaces:
            task: {allowed: [object.search]}
          tool_traits:
            object.search: {strategy: [exploration]}
        """
    )
    diagnostic = only(check(text), "trait-target-unknown")
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.path == 'agents.main.tools[0].tool_traits["object.search"]'
    assert position(diagnostic) == where(text, "object.search:")
    assert diagnostic.hint == "Use search_objects (the callable for object.search)."


def test_it_suggests_a_close_callable_for_a_mistyped_trait_key() -> None:
    text = doc(
        """
        - ref: t.py
          alias: jobs
          allowed: [search]
          tool_traits:
            serach: {strategy: [exploration]}
        """
    )
    diagnostic = only(check(text), "trait-target-unknown")
    assert diagnostic.path == "agents.main.tools[0].tool_traits.serach"
    assert position(diagnostic) == where(text, "serach")
    assert diagnostic.hint == "Did you mean search?"


@pytest.mark.parametrize(
    ("connection", "path", "words"),
    [
        (
            "{kind: mcp, server_id: w, alias: w, allowed: [a], tool_traits: {other.a: {}}}",
            'agents.main.tools[0].tool_traits["other.a"]',
            "it names mcp.w.other.a",
        ),
        (
            "{kind: named_service, namespaces: {t: {allowed: [object.get]}}, "
            "tool_traits: {upsert_object: {}}}",
            "agents.main.tools[0].tool_traits.upsert_object",
            "no namespace allows object.upsert",
        ),
        (
            "{kind: named_service, namespaces: {t: {allowed: [object.get]}}, "
            "tool_traits: {provider_capabilities: {}}}",
            "agents.main.tools[0].tool_traits.provider_capabilities",
            "never offered",
        ),
    ],
)
def test_it_explains_why_a_trait_key_matches_nothing(
    connection: str, path: str, words: str
) -> None:
    diagnostic = only(check(doc("- " + connection)), "trait-target-unknown")
    assert diagnostic.path == path
    assert words in diagnostic.message


@pytest.mark.parametrize(
    "connection",
    [
        "{kind: mcp, server_id: k, alias: knowledge, allowed: ['*'], "
        "tool_traits: {'*': {strategy: [exploration]}}}",
        "{kind: mcp, server_id: k, alias: knowledge, "
        "tool_traits: {search: {strategy: [exploration]}}}",
        "{ref: t.py, alias: jobs, allowed: ['*'], tool_traits: {'*': {strategy: [exploration]}}}",
    ],
)
def test_it_tells_that_tools_it_has_not_seen_get_the_traits_without_blocking(
    connection: str,
) -> None:
    found = check(doc("- " + connection))
    assert "trait-target-unknown" not in codes(found)
    diagnostic = only(found, "tools-unknown")
    assert diagnostic.severity is Severity.INFO
    assert "every tool the" in diagnostic.message
    assert "has not seen them" in diagnostic.message
    assert not [d for d in found if d.severity is Severity.ERROR]


def test_a_named_tool_the_manifest_says_does_not_exist_stays_an_error() -> None:
    text = doc(
        "- {kind: mcp, server_id: k, alias: knowledge, "
        "tool_traits: {serch: {strategy: [exploration]}}}"
    )
    manifest = parse_manifest({"mcp.knowledge.search": {}})
    found = check(text, manifest)
    assert "tools-unknown" not in codes(found)
    assert only(found, "trait-target-unknown").severity is Severity.ERROR


def test_a_dotted_mcp_tool_name_is_reached_by_its_bare_key() -> None:
    # The runtime qualifies "files.read" under alias fs as mcp.fs.files.read: the tool itself.
    text = doc(
        "- {kind: mcp, server_id: fs, alias: fs, allowed: [files.read], "
        "tool_traits: {files.read: {strategy: exploration}}}"
    )
    assert none_of(check(text), "trait-target-unknown")


def test_a_python_star_is_a_wildcard_too() -> None:
    text = doc("- {ref: t.py, alias: jobs, allowed: [s], tool_traits: {'*': {strategy: neutral}}}")
    assert none_of(check(text), "trait-target-unknown")


def test_a_dotted_key_reaching_another_connection_is_not_reported() -> None:
    text = doc(
        "- {ref: t.py, alias: ya, allowed: [x], tool_traits: {yb.u: {strategy: exploitation}}}\n"
        "- {ref: t.py, alias: yb, allowed: [u]}"
    )
    assert none_of(check(text), "trait-target-unknown")


def test_it_reports_an_operation_the_runtime_ignores_at_the_item() -> None:
    text = doc("- {kind: named_service, namespaces: {task: {allowed: [object.get, object.find]}}}")
    diagnostic = only(check(text), "operation-unknown")
    assert diagnostic.severity is Severity.ERROR
    assert diagnostic.path == "agents.main.tools[0].namespaces.task.allowed[1]"
    assert position(diagnostic) == where(text, "object.find")


def test_a_star_is_no_wildcard_for_named_services() -> None:
    text = doc("- {kind: named_service, namespaces: {task: {operations: [object.get, '*']}}}")
    diagnostic = only(check(text), "operation-unknown")
    assert diagnostic.path == "agents.main.tools[0].namespaces.task.operations[1]"
    assert position(diagnostic) == where(text, "'*'")
    assert "not a wildcard" in diagnostic.message


def test_it_informs_that_provider_capabilities_is_never_offered() -> None:
    text = doc(
        "- {kind: named_service, "
        "namespaces: {task: {allowed: [object.get, provider.capabilities]}}}"
    )
    diagnostic = only(check(text), "capabilities-not-offered")
    assert diagnostic.severity is Severity.INFO
    assert diagnostic.path == "agents.main.tools[0].namespaces.task.allowed[1]"
    assert position(diagnostic) == where(text, "provider.capabilities")


# --- MCP wildcards --------------------------------------------------------------------------------

BROWSER = """
- kind: mcp
  server_id: browser
  alias: browser
  allowed: [open_page, click]
  tool_traits:
    open_page: {strategy: [exploration]}
    click: {strategy: [exploitation], note: kept}
    "*": {strategy: [exploration]}
"""


def test_it_warns_where_the_wildcard_overrides_a_concrete_value() -> None:
    text = doc(BROWSER)
    diagnostic = only(check(text), "wildcard-overrides")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].tool_traits.click.strategy"
    assert position(diagnostic) == where(text, "strategy", nth=2)
    assert "gets [exploration], not [exploitation]" in diagnostic.message


def test_it_warns_that_a_wildcard_spans_tools_of_different_strategies() -> None:
    text = doc(BROWSER)
    diagnostic = only(check(text), "wildcard-mixed")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == 'agents.main.tools[0].tool_traits["*"]'
    assert position(diagnostic) == where(text, '"*"')


def test_a_wildcard_equal_to_the_concrete_values_is_quiet() -> None:
    text = doc(BROWSER.replace("[exploitation]", "[Exploration]"))
    assert codes(check(text)) & {"wildcard-overrides", "wildcard-mixed"} == set()


def test_it_warns_when_two_mcp_keys_name_the_same_tool() -> None:
    text = doc(
        "- {kind: mcp, server_id: b, alias: b, allowed: [x], "
        "tool_traits: {x: {strategy: neutral}, b.x: {strategy: exploration}}}"
    )
    diagnostic = only(check(text), "trait-key-duplicate")
    assert diagnostic.path == 'agents.main.tools[0].tool_traits["b.x"]'
    assert position(diagnostic) == where(text, "b.x")


# --- namespace overrides --------------------------------------------------------------------------


def test_it_warns_that_a_namespace_override_drops_the_default_execution() -> None:
    text = doc(
        f"""
        - kind: named_service
          alias: svc
          namespaces:
            task:
              allowed: [object.search]
              tool_traits:
                search_objects: {{strategy: [exploration]}}
          tool_traits:
            search_objects:
              strategy: [neutral]
              execution: {EARLY_FLOW}
        """
    )
    diagnostic = only(check(text), "override-drops-execution")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].namespaces.task.tool_traits.search_objects"
    assert position(diagnostic) == where(text, "search_objects:")


def test_an_override_for_a_callable_the_namespace_does_not_offer_is_reported() -> None:
    text = doc(
        """
        - kind: named_service
          namespaces:
            task: {allowed: [object.get], tool_traits: {search_objects: {strategy: neutral}}}
            note: {allowed: [object.search]}
        """
    )
    diagnostic = only(check(text), "trait-target-unknown")
    assert diagnostic.path == "agents.main.tools[0].namespaces.task.tool_traits.search_objects"
    assert position(diagnostic) == where(text, "search_objects")


# --- whole documents, manifests, robustness -------------------------------------------------------


def test_it_validates_every_agent() -> None:
    text = (
        "surfaces:\n  as_consumer:\n    agents:\n"
        "      main:\n        tools: [{kind: ftp}]\n"
        "      helper:\n        tools: [{kind: mcq}]\n"
    )
    found = [d for d in check(text) if d.code == "connection-kind"]
    assert [d.path for d in found] == ["agents.main.tools[0].kind", "agents.helper.tools[0].kind"]


def test_it_checks_manifest_values_the_runtime_reads() -> None:
    manifest = parse_manifest(
        {
            "jobs.search": {"tool_traits": {"strategy": ["bogus"]}},
            "jobs.export": {"tool_traits": {"strategy": ["nope"]}},
        }
    )
    text = doc(
        "- {ref: t.py, alias: jobs, allowed: ['*'], "
        "tool_traits: {export: {strategy: exploitation}}}"
    )
    diagnostics = check(text, manifest)
    diagnostic = only(diagnostics, "strategy-value")
    assert diagnostic.path == 'manifest["jobs.search"].tool_traits.strategy[0]'
    assert position(diagnostic) == (None, None)
    assert "jobs.search" in diagnostic.message


def test_manifest_fed_tools_get_tool_level_warnings() -> None:
    manifest = parse_manifest({"mcp.web.open": {}, "mcp.web.close": {}})
    text = doc("- {kind: mcp, server_id: web, alias: web}")
    found = [d for d in check(text, manifest) if d.code == "strategy-unknown"]
    assert ["mcp.web.open" in found[0].message, "mcp.web.close" in found[1].message] == [True, True]
    assert all(position(d) == where(text, "kind") for d in found)


def test_a_document_without_agents_gives_no_content_diagnostics() -> None:
    assert validate_policy({"surfaces": {}}, SourceMap()) == []
    assert validate_policy("text", SourceMap()) == []


KEYS = st.sampled_from(
    [
        "tools", "kind", "python", "mcp", "named_service", "alias", "name", "id", "ref",
        "module", "server_id", "allowed", "tools", "tool_traits", "strategy", "execution",
        "namespaces", "operations", "allowed_operations", "tool_execution", "timeout_s", "mode",
        "retry", "confirm", "status_tool", "async_alternative", "*", "search", "object.search",
        "search_objects", "mcp.a.b", "a.*", "exploration", "neutral", "sync", "async_job",
    ]
)  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 100),
    st.floats(allow_nan=True),
    KEYS,
    st.text(max_size=5),
)
JSONISH = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.integers(0, 3), st.none()), children, max_size=5),
    ),
    max_leaves=40,
)


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(values, JSONISH)


CONNECTIONS = st.fixed_dictionaries(
    {},
    optional={
        "kind": _maybe(st.sampled_from(["python", "mcp", "named_service"])),
        "alias": _maybe(st.sampled_from(["a", "react", "b"])),
        "name": _maybe(st.just("a")),
        "id": JSONISH,
        "ref": _maybe(st.just("t.py")),
        "server_id": _maybe(st.just("a")),
        "allowed": _maybe(st.lists(KEYS, max_size=4)),
        "tools": _maybe(st.lists(KEYS, max_size=4)),
        "tool_traits": _maybe(st.dictionaries(KEYS, JSONISH, max_size=4)),
        "namespaces": _maybe(
            st.dictionaries(
                KEYS,
                _maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "allowed": _maybe(
                                st.lists(st.sampled_from(["object.get", "*", "x"]), max_size=3)
                            ),
                            "tool_traits": _maybe(st.dictionaries(KEYS, JSONISH, max_size=2)),
                        },
                    )
                ),
                max_size=2,
            )
        ),
        "tool_execution": _maybe(st.dictionaries(KEYS, JSONISH, max_size=3)),
    },
)
AGENTS = st.dictionaries(
    st.one_of(KEYS, st.integers()),
    st.one_of(JSONISH, st.fixed_dictionaries({"tools": st.lists(CONNECTIONS, max_size=3)})),
    max_size=3,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agents=AGENTS)
def test_it_never_raises_on_any_structure_under_agents(agents: dict[Any, Any]) -> None:
    data = {"surfaces": {"as_consumer": {"agents": agents}}}
    manifest = parse_manifest({"a.search": {"tool_traits": {"strategy": 5}}, "mcp.a.b": {}})
    result = validate_policy(data, SourceMap(), manifest)
    assert isinstance(result, list)
    assert all(isinstance(d, Diagnostic) for d in result)


def test_it_warns_about_an_alias_a_model_cannot_type() -> None:
    text = doc(
        "- {ref: t.py, alias: 'my jobs!', allowed: [s], tool_traits: {s: {strategy: neutral}}}"
    )
    diagnostic = only(check(text), "alias-untypeable")
    assert diagnostic.severity is Severity.WARNING
    assert diagnostic.path == "agents.main.tools[0].alias"


def test_it_warns_about_a_tool_id_a_model_cannot_type() -> None:
    text = doc(
        "- {ref: t.py, alias: jobs, allowed: ['run job'], "
        "tool_traits: {run job: {strategy: neutral}}}"
    )
    diagnostic = only(check(text), "alias-untypeable")
    assert "jobs.run job" in diagnostic.message


def test_it_accepts_dots_dashes_and_underscores_in_ids() -> None:
    text = doc(
        "- {ref: t.py, alias: my-jobs_2, allowed: [run.v2], "
        "tool_traits: {'*': {strategy: neutral}}}"
    )
    assert none_of(check(text), "alias-untypeable")


def test_a_python_wildcard_overriding_a_concrete_entry_is_reported() -> None:
    text = doc(
        "- {ref: t.py, alias: jobs, allowed: [s], "
        "tool_traits: {s: {strategy: exploration}, '*': {strategy: neutral}}}"
    )
    diagnostic = only(check(text), "wildcard-overrides")
    assert "jobs.s gets [neutral]" in diagnostic.message or "jobs.s gets" in diagnostic.message


def test_it_says_when_the_model_reads_the_compact_catalog_or_none() -> None:
    compact = "react:\n  main:\n    instructions: {tool_catalog_detail: Compact}\n" + doc(CLEAN)
    note = only(check(compact), "catalog-compact")
    assert note.severity is Severity.INFO
    assert "reads the compact tool catalog by default" in note.message
    assert "react.main.instructions.tool_catalog_detail" in note.message
    assert "no strategy or early-start lines" in note.message
    off = "react:\n  main:\n    instructions: {include_tool_catalog: false}\n" + doc(CLEAN)
    assert "reads no tool catalog at all" in only(check(off), "catalog-compact").message
    assert not [d for d in check(doc(CLEAN)) if d.code == "catalog-compact"]
