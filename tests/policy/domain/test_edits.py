from __future__ import annotations

import copy
from typing import Any

import pytest

from core.vocabulary import EARLY_PROFILE
from policy.domain.edits import (
    EditError,
    NamespaceEdit,
    add_agent,
    add_connection,
    build_design,
    build_traits,
    merge_operations,
    move_connection,
    parse_name_list,
    remove_agent,
    remove_connection,
    rename_agent,
    set_namespaces,
    set_tool,
    update_connection,
)

EARLY = dict(EARLY_PROFILE)


def policy(**agents: Any) -> dict[str, Any]:
    return {"surfaces": {"as_consumer": {"agents": agents}}}


def agents_of(doc: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = doc["surfaces"]["as_consumer"]["agents"]
    return value


def tools_of(doc: dict[str, Any], agent: str = "main") -> list[Any]:
    value: list[Any] = agents_of(doc)[agent]["tools"]
    return value


def one_connection(**connection: Any) -> dict[str, Any]:
    return policy(main={"tools": [connection]})


# --- agents --------------------------------------------------------------------------------------


def test_adding_an_agent_gives_it_an_empty_tool_list_and_leaves_the_input_alone() -> None:
    doc = policy()
    new = add_agent(doc, "  main ")
    assert agents_of(new) == {"main": {"tools": []}}
    assert agents_of(doc) == {}


def test_it_refuses_a_second_agent_of_the_same_name() -> None:
    with pytest.raises(EditError, match="already exists"):
        add_agent(policy(main={}), "main")


@pytest.mark.parametrize("name", ["", "  ", "-lead", "a b", "<b>x</b>", "x" * 101, "a/b"])
def test_it_refuses_a_bad_agent_name(name: str) -> None:
    with pytest.raises(EditError, match="agent name"):
        add_agent(policy(), name)


def test_renaming_keeps_the_agent_in_place_with_its_body() -> None:
    doc = policy(a={"tools": [1]}, b={"tools": [2]}, c={})
    new = rename_agent(doc, "b", "bee")
    assert list(agents_of(new)) == ["a", "bee", "c"]
    assert agents_of(new)["bee"] == {"tools": [2]}


def test_renaming_onto_another_agent_is_refused() -> None:
    with pytest.raises(EditError, match="already exists"):
        rename_agent(policy(a={}, b={}), "a", "b")


def test_removing_an_unknown_agent_is_refused() -> None:
    with pytest.raises(EditError, match="no agent"):
        remove_agent(policy(a={}), "b")


# --- connections ---------------------------------------------------------------------------------


def test_adding_a_connection_leaves_out_empty_fields() -> None:
    new = add_connection(
        policy(main={"tools": []}), "main", {"kind": "python", "ref": "t.py", "module": None}
    )
    assert tools_of(new) == [{"kind": "python", "ref": "t.py"}]


def test_updating_keeps_every_key_the_form_does_not_manage() -> None:
    doc = one_connection(
        kind="python", module="pkg.tools", discovery={"scan": True}, alias="a", allowed=["x"]
    )
    new = update_connection(doc, "main", 0, {"alias": "b", "allowed": ["y"], "ref": None})
    assert tools_of(new)[0] == {
        "kind": "python",
        "module": "pkg.tools",
        "discovery": {"scan": True},
        "alias": "b",
        "allowed": ["y"],
    }


def test_moving_and_removing_connections() -> None:
    doc = policy(main={"tools": [{"alias": "a"}, {"alias": "b"}, {"alias": "c"}]})
    moved = move_connection(doc, "main", 2, 0)
    assert [c["alias"] for c in tools_of(moved)] == ["c", "a", "b"]
    removed = remove_connection(moved, "main", 1)
    assert [c["alias"] for c in tools_of(removed)] == ["c", "b"]


@pytest.mark.parametrize(("index", "to"), [(0, -1), (2, 3), (5, 0)])
def test_a_move_out_of_range_is_refused(index: int, to: int) -> None:
    doc = policy(main={"tools": [{"alias": "a"}, {"alias": "b"}, {"alias": "c"}]})
    with pytest.raises(EditError):
        move_connection(doc, "main", index, to)


# --- traits and design ---------------------------------------------------------------------------


def test_early_start_writes_the_complete_profile_and_keeps_extra_fields() -> None:
    traits = build_traits(
        {"execution": {"queue": "fast", "trigger": "x"}, "owner": "ops"},
        strategy=["neutral"],
        early=True,
    )
    assert traits == {
        "execution": {**EARLY, "queue": "fast"},
        "owner": "ops",
        "strategy": ["neutral"],
    }


def test_no_strategy_ticked_removes_the_strategy_key() -> None:
    traits = build_traits({"strategy": ["exploration"], "owner": "ops"}, strategy=[], early=False)
    assert traits == {"owner": "ops"}


def test_strategy_values_are_written_in_their_canonical_order() -> None:
    traits = build_traits(None, strategy=["neutral", "exploration", "bogus"], early=False)
    assert traits == {"strategy": ["exploration", "neutral"]}


def test_without_early_start_the_advanced_fields_are_written_as_typed() -> None:
    traits = build_traits(
        {"execution": EARLY},
        strategy=[],
        early=False,
        execution_fields={"trigger": " tool_call_complete ", "replay": ""},
    )
    assert traits == {"execution": {"trigger": "tool_call_complete"}}


def test_the_design_keeps_unknown_keys_and_drops_cleared_fields() -> None:
    design = build_design({"timeout_s": 5, "owner": "ops"}, {"timeout_s": None, "mode": "sync"})
    assert design == {"owner": "ops", "mode": "sync"}


def test_set_tool_writes_traits_and_design_and_removes_empty_entries() -> None:
    doc = one_connection(alias="a", ref="t.py", allowed=["s"])
    new = set_tool(
        doc, "main", 0, "s", traits={"strategy": ["exploration"]}, design={"timeout_s": 3}
    )
    assert tools_of(new)[0]["tool_traits"] == {"s": {"strategy": ["exploration"]}}
    assert tools_of(new)[0]["tool_execution"] == {"s": {"timeout_s": 3}}
    cleared = set_tool(new, "main", 0, "s", traits={}, design={})
    assert "tool_traits" not in tools_of(cleared)[0]
    assert "tool_execution" not in tools_of(cleared)[0]


def test_set_tool_can_write_the_design_under_its_own_key() -> None:
    doc = one_connection(
        kind="mcp",
        server_id="b",
        alias="b",
        tool_traits={"mcp.b.open": {"strategy": ["neutral"]}},
        tool_execution={"open": {"timeout_s": 3}},
    )
    new = set_tool(
        doc,
        "main",
        0,
        "mcp.b.open",
        traits={"strategy": []},
        design={"timeout_s": 9},
        design_key="open",
    )
    assert tools_of(new)[0]["tool_execution"] == {"open": {"timeout_s": 9}}
    assert list(tools_of(new)[0]["tool_traits"]) == ["mcp.b.open"]


def test_a_namespace_override_replaces_only_that_namespace_entry() -> None:
    doc = one_connection(
        kind="named_service",
        namespaces={"task": {"allowed": ["object.search"]}},
        tool_execution={"search_objects": {"timeout_s": 3}},
    )
    new = set_tool(
        doc,
        "main",
        0,
        "search_objects",
        traits={"strategy": ["neutral"]},
        design=None,
        namespace="task",
    )
    connection = tools_of(new)[0]
    assert connection["namespaces"]["task"]["tool_traits"] == {
        "search_objects": {"strategy": ["neutral"]}
    }
    assert connection["tool_execution"] == {"search_objects": {"timeout_s": 3}}


def test_an_override_for_a_missing_namespace_is_refused() -> None:
    doc = one_connection(kind="named_service", namespaces={"task": {"allowed": []}})
    with pytest.raises(EditError, match="no namespace 'nope'"):
        set_tool(doc, "main", 0, "x", traits={}, design=None, namespace="nope")


# --- named-service namespaces --------------------------------------------------------------------


def test_merge_keeps_unknown_items_in_place_and_appends_new_ones_in_spec_order() -> None:
    existing = ["object.get", "*", "object.bogus", "object.search"]
    merged = merge_operations(existing, ["object.delete", "object.search", "provider.about"])
    assert merged == ["*", "object.bogus", "object.search", "provider.about", "object.delete"]


def test_set_namespaces_keeps_overrides_list_key_and_other_keys() -> None:
    doc = one_connection(
        kind="named_service",
        alias="ns",
        namespaces={
            "task": {
                "operations": ["object.get"],
                "tool_traits": {"get_object": {"strategy": ["exploration"]}},
                "note": "kept",
            },
            "gone": {"allowed": ["object.list"]},
        },
    )
    new = set_namespaces(
        doc,
        "main",
        0,
        [
            NamespaceEdit("tasks", ("object.get", "object.upsert"), original="task"),
            NamespaceEdit("docs", ("object.search",)),
        ],
    )
    namespaces = tools_of(new)[0]["namespaces"]
    assert list(namespaces) == ["tasks", "docs"]
    assert namespaces["tasks"] == {
        "operations": ["object.get", "object.upsert"],
        "tool_traits": {"get_object": {"strategy": ["exploration"]}},
        "note": "kept",
    }
    assert namespaces["docs"] == {"allowed": ["object.search"]}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([NamespaceEdit("a", ()), NamespaceEdit("a", ())], "listed twice"),
        ([NamespaceEdit(" ", ())], "needs a name"),
    ],
)
def test_set_namespaces_refuses_blank_or_repeated_names(
    rows: list[NamespaceEdit], message: str
) -> None:
    doc = one_connection(kind="named_service")
    with pytest.raises(EditError, match=message):
        set_namespaces(doc, "main", 0, rows)


def test_no_namespaces_removes_the_key() -> None:
    doc = one_connection(kind="named_service", namespaces={"a": {"allowed": []}})
    assert "namespaces" not in tools_of(set_namespaces(doc, "main", 0, []))[0]


def test_edits_never_change_their_input() -> None:
    doc = one_connection(kind="named_service", namespaces={"a": {"allowed": ["object.get"]}})
    before = copy.deepcopy(doc)
    set_namespaces(doc, "main", 0, [NamespaceEdit("a", ("object.list",), original="a")])
    set_tool(
        doc, "main", 0, "get_object", traits={"strategy": ["neutral"]}, design={"confirm": True}
    )
    assert doc == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("search, export_report\nlaunch", ["search", "export_report", "launch"]),
        ("  a ,, a\n\n b ", ["a", "b"]),
        ("", []),
    ],
)
def test_a_typed_list_is_split_on_commas_and_lines(text: str, expected: list[str]) -> None:
    assert parse_name_list(text) == expected
