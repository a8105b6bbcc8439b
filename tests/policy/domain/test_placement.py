from __future__ import annotations

from typing import Any

import pytest

from engine.document.diagnostics import Diagnostic, Severity
from engine.document.paths import format_path
from engine.tools.manifest import parse_manifest
from engine.tools.resolution import resolve_agent
from policy.domain.placement import (
    PathSyntaxError,
    Placement,
    entry_keys,
    key_target,
    parse_path,
    place,
    tool_rows,
)
from policy.domain.validation.validate import validate_policy
from policy.domain.yaml_io import dump_body, load_policy

EARLY = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}


def policy(*connections: Any, agent: str = "main") -> dict[str, Any]:
    return {"surfaces": {"as_consumer": {"agents": {agent: {"tools": list(connections)}}}}}


def diag(path: str, code: str = "x", severity: Severity = Severity.WARNING) -> Diagnostic:
    return Diagnostic(severity, code, path, None, None, "m", "h")


def placed(data: dict[str, Any], agent: str = "main", manifest: Any = None) -> Placement:
    """Validate the document as the editor does, then place this agent's diagnostics."""
    loaded = load_policy(dump_body(data))
    diagnostics = validate_policy(loaded.data, loaded.source, manifest)
    connections = resolve_agent(loaded.data, agent, manifest).connections
    return place(diagnostics, agent, connections, manifest)


def codes(diagnostics: tuple[Diagnostic, ...]) -> list[str]:
    return [d.code for d in diagnostics]


# --- parse_path ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ("surfaces", "as_consumer", "agents", "main", "tools", 2, "tool_traits", "search"),
        ("surfaces", "as_consumer", "agents", "main", "tools", 0, "tool_traits", "*"),
        ("surfaces", "as_consumer", "agents", "my.agent", "tools", 0, "allowed", 3),
        ("surfaces", "as_consumer", "agents", "a", "tools", 0, "tool_traits", "object.search"),
        ("surfaces", "as_consumer", "agents", "x", "tools", 1, "tool_traits", 'we"ird]', "s"),
        ("surfaces", "as_consumer", "agents", "5", "tools"),
        ("manifest", "jobs.search", "tool_traits", "strategy"),
    ],
)
def test_it_reads_back_every_path_format_path_writes(path: tuple[Any, ...]) -> None:
    expected = path[2:] if path[0] == "surfaces" else path
    assert parse_path(format_path(path)) == expected


@pytest.mark.parametrize("text", ["a..b", ".a", "a[x]", 'a["x"', "a]b", "a[1"])
def test_it_refuses_text_that_is_not_a_path(text: str) -> None:
    with pytest.raises(PathSyntaxError):
        parse_path(text)


# --- boundaries ---------------------------------------------------------------------------------

TWO_SEARCHES = policy(
    {"kind": "python", "ref": "t.py", "alias": "jobs", "allowed": ["search", "search_objects"]}
)


def test_search_does_not_catch_diagnostics_of_search_objects() -> None:
    connections = resolve_agent(TWO_SEARCHES, "main").connections
    found = place(
        [
            diag("agents.main.tools[0].tool_traits.search_objects.strategy", "a"),
            diag("agents.main.tools[0].tool_traits.search", "b"),
            diag("agents.main.tools[0].tool_execution.search.timeout_s", "c"),
        ],
        "main",
        connections,
    )
    assert codes(found.for_tool(0, "search")) == ["b", "c"]
    assert codes(found.for_tool(0, "search_objects")) == ["a"]


def test_tools_1_does_not_catch_tools_12() -> None:
    many = policy(*[{"ref": "t.py", "alias": f"a{i}", "allowed": ["s"]} for i in range(13)])
    connections = resolve_agent(many, "main").connections
    found = place([diag("agents.main.tools[12].alias", "twelve")], "main", connections)
    assert found.for_connection(1) == ()
    assert codes(found.for_connection(12)) == ["twelve"]


def test_an_agent_does_not_catch_an_agent_whose_name_it_prefixes() -> None:
    data = policy({"ref": "t.py", "alias": "a", "allowed": ["s"]})
    connections = resolve_agent(data, "main").connections
    found = place(
        [diag("agents.main_two.tools[0].alias", "other"), diag("agents.main.tools", "mine")],
        "main",
        connections,
    )
    assert codes(found.agent) == ["mine"]
    assert found.connections == {}


# --- real diagnostics --------------------------------------------------------------------------


def test_a_strategy_error_lands_on_its_tool_row() -> None:
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["search", "export"],
            "tool_traits": {"search": {"strategy": ["exploraton"]}},
        }
    )
    found = placed(data)
    assert "strategy-value" in codes(found.for_tool(0, "search"))
    assert "strategy-value" not in codes(found.for_tool(0, "export"))


def test_execution_inert_lands_on_the_row_of_the_tool_with_the_profile() -> None:
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["launch"],
            "tool_traits": {"launch": {"strategy": ["exploration"], "execution": EARLY}},
        }
    )
    assert "execution-inert" in codes(placed(data).for_tool(0, "launch"))


def test_a_tool_with_no_traits_gets_strategy_unknown_through_its_allowed_item() -> None:
    data = policy({"ref": "t.py", "alias": "jobs", "allowed": ["a", "b"]})
    found = placed(data)
    assert "strategy-unknown" in codes(found.for_tool(0, "b"))
    assert found.for_connection(0) == ()


def test_a_trait_key_naming_no_tool_goes_to_the_connection() -> None:
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["search"],
            "tool_traits": {"serch": {"strategy": ["exploration"]}},
        }
    )
    found = placed(data)
    assert "trait-target-unknown" in codes(found.for_connection(0))
    assert "trait-target-unknown" not in codes(found.for_tool(0, "search"))


def test_an_unloadable_connection_keeps_its_diagnostics() -> None:
    found = placed(policy({"kind": "python", "alias": "jobs", "allowed": ["a"]}))
    assert codes(found.for_connection(0)) == ["connection-unloadable"]


def test_a_mcp_entry_written_qualified_lands_on_the_tool_row() -> None:
    data = policy(
        {
            "kind": "mcp",
            "server_id": "browser",
            "alias": "browser",
            "allowed": ["open_page", "click"],
            "tool_traits": {"mcp.browser.open_page": {"strategy": ["exploraton"]}},
        }
    )
    assert "strategy-value" in codes(placed(data).for_tool(0, "open_page"))


def test_mcp_wildcard_entries_form_their_own_row() -> None:
    data = policy(
        {
            "kind": "mcp",
            "server_id": "browser",
            "alias": "browser",
            "allowed": ["open_page", "click"],
            "tool_traits": {
                "open_page": {"strategy": ["exploration"]},
                "click": {"strategy": ["exploitation"]},
                "*": {"strategy": ["neutral"]},
            },
        }
    )
    found = placed(data)
    assert "wildcard-mixed" in codes(found.for_tool(0, "*"))
    # The override warning is about the concrete entry that loses.
    assert "wildcard-overrides" in codes(found.for_tool(0, "open_page"))
    connection = resolve_agent(data, "main").connections[0]
    assert tool_rows(connection) == ["open_page", "click", "*"]


def test_named_service_operations_and_overrides_land_on_the_callable_row() -> None:
    data = policy(
        {
            "kind": "named_service",
            "namespaces": {
                "task": {
                    "allowed": ["object.search", "object.upsert"],
                    "tool_traits": {
                        "search_objects": {"strategy": ["exploration"], "execution": EARLY}
                    },
                }
            },
            "tool_traits": {"upsert_object": {"strategy": ["exploitation"]}},
        }
    )
    found = placed(data)
    assert "execution-inert" in codes(found.for_tool(0, "search_objects"))
    assert "exploitation-unsafe-retry" in codes(found.for_tool(0, "upsert_object"))
    assert found.for_connection(0) == ()


def test_an_operation_id_used_as_a_trait_key_goes_to_the_connection() -> None:
    data = policy(
        {
            "kind": "named_service",
            "namespaces": {"task": {"allowed": ["object.search"]}},
            "tool_traits": {"object.search": {"strategy": ["exploration"]}},
        }
    )
    found = placed(data)
    assert "trait-target-unknown" in codes(found.for_connection(0))
    assert "trait-target-unknown" not in codes(found.for_tool(0, "search_objects"))


def test_an_unknown_operation_goes_to_the_connection() -> None:
    data = policy(
        {"kind": "named_service", "namespaces": {"task": {"allowed": ["object.search", "nope"]}}}
    )
    assert "operation-unknown" in codes(placed(data).for_connection(0))


def test_manifest_values_land_on_the_tool_they_describe() -> None:
    manifest = parse_manifest({"jobs.search": {"tool_traits": {"strategy": ["bogus"]}}})
    data = policy({"ref": "t.py", "alias": "jobs"})
    found = placed(data, manifest=manifest)
    assert "strategy-value" in codes(found.for_tool(0, "search"))


def test_manifest_findings_of_another_agents_manifest_are_left_out() -> None:
    theirs = parse_manifest({"jobs.search": {"tool_traits": {"strategy": ["bogus"]}}})
    data = policy({"ref": "t.py", "alias": "jobs", "allowed": ["search"]})
    loaded = load_policy(dump_body(data))
    diagnostics = validate_policy(loaded.data, loaded.source, theirs)
    connections = resolve_agent(loaded.data, "main").connections
    mine = parse_manifest({"jobs.other": {}})
    for manifest in (None, mine):
        found = place(diagnostics, "main", connections, manifest)
        assert "strategy-value" not in codes(found.for_tool(0, "search"))


def test_the_counts_cover_every_place() -> None:
    data = policy(
        "junk",
        {"kind": "python", "alias": "a"},
        {"ref": "t.py", "alias": "b", "allowed": ["s"], "tool_traits": {"s": {"strategy": "x"}}},
    )
    counts = placed(data).counts()
    assert counts.errors == 2  # shape (agent), strategy-value (row)
    assert counts.warnings == 1  # connection-unloadable: python without module or ref


def test_a_non_mapping_connection_is_reported_on_the_agent() -> None:
    data = policy("just text", {"ref": "t.py", "alias": "a", "allowed": ["s"]})
    assert "shape" in codes(placed(data).agent)


def test_diagnostics_of_other_agents_are_left_out() -> None:
    data = policy({"ref": "t.py", "alias": "a", "allowed": ["s"]})
    data["surfaces"]["as_consumer"]["agents"]["other"] = {"tools": [{"kind": "bogus"}]}
    found = placed(data)
    everything = [*found.agent, *sum(found.connections.values(), ())]
    assert "connection-kind" not in [d.code for d in everything]


# --- counts and keys ---------------------------------------------------------------------------


def test_entry_keys_are_the_keys_already_written() -> None:
    data = policy(
        {
            "kind": "mcp",
            "server_id": "browser",
            "alias": "browser",
            "allowed": ["open_page", "click"],
            "tool_traits": {"mcp.browser.open_page": {}, "browser.*": {}},
            "tool_execution": {"open_page": {"timeout_s": 5}},
        }
    )
    connection = resolve_agent(data, "main").connections[0]
    assert entry_keys(connection, "open_page") == ("mcp.browser.open_page", "open_page")
    assert entry_keys(connection, "click") == ("click", "click")
    assert entry_keys(connection, "*") == ("browser.*", "*")
    assert key_target(connection, "mcp.browser.open_page") == "open_page"
    assert key_target(connection, "browser.*") == "*"
