"""Which tools an agent gets with which traits (engine.tools.resolution): connections,
namespaces, aliases, manifests and the built-ins.

Over 500 lines on purpose: every case builds on the same connection helpers, in the order of
DESIGN §2.6."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from core.vocabulary import EARLY_PROFILE
from engine.tools.manifest import Manifest, ManifestError, parse_manifest
from engine.tools.resolution import (
    AgentResolution,
    EffectiveTool,
    UnknownAgentError,
    agent_names,
    effective_json,
    resolve_agent,
    resolve_consumer,
)
from engine.traits.builtins import builtins_for_role

BUILTIN_IDS = [tool.tool_id for tool in builtins_for_role("parent")]
EARLY = dict(EARLY_PROFILE)


def policy(*connections: Any, agent: str = "main") -> dict[str, Any]:
    return {"surfaces": {"as_consumer": {"agents": {agent: {"tools": list(connections)}}}}}


def configured(resolution: AgentResolution) -> list[str]:
    return [tool.tool_id for tool in resolution.tools if not tool.builtin]


def tool(resolution: AgentResolution, tool_id: str) -> EffectiveTool:
    found = resolution.find(tool_id)
    assert found is not None, f"{tool_id} not in {[t.tool_id for t in resolution.tools]}"
    return found

    return found


# --- model-facing ids -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("connection", "expected"),
    [
        ({"kind": "python", "ref": "t.py", "alias": "jobs", "allowed": ["search"]}, "jobs.search"),
        ({"ref": "t.py", "alias": "jobs", "allowed": ["search"]}, "jobs.search"),
        ({"module": "pkg.t", "name": "by_name", "allowed": ["search"]}, "by_name.search"),
        ({"ref": "t.py", "alias": "a", "name": "n", "allowed": ["search"]}, "a.search"),
        (
            {"kind": "mcp", "server_id": "browser", "alias": "web", "allowed": ["open"]},
            "mcp.web.open",
        ),
        ({"kind": "mcp", "server_id": "browser", "allowed": ["open"]}, "mcp.mcp_browser.open"),
        ({"kind": "mcp", "server": "browser", "allowed": ["open"]}, "mcp.mcp_browser.open"),
        ({"kind": "mcp", "name": "browser", "allowed": ["open"]}, "mcp.browser.open"),
        (
            {"kind": "named_service", "namespaces": {"task": {"allowed": ["object.get"]}}},
            "named_services.get_object",
        ),
        (
            {
                "kind": "named_service",
                "name": "tasks",
                "namespaces": {"t": {"allowed": ["object.get"]}},
            },
            "tasks.get_object",
        ),
    ],
)
def test_it_names_tools_like_the_runtime(connection: dict[str, Any], expected: str) -> None:
    assert configured(resolve_agent(policy(connection), "main")) == [expected]


def test_it_does_not_read_an_id_key() -> None:
    connection = {"id": "workspace_jobs", "ref": "t.py", "alias": "jobs", "allowed": ["search"]}
    assert configured(resolve_agent(policy(connection), "main")) == ["jobs.search"]


@pytest.mark.parametrize(
    "connection",
    [
        {"id": "jobs", "ref": "t.py", "allowed": ["search"]},  # no alias, no name
        {"alias": "jobs", "allowed": ["search"]},  # no module, no ref
        {"alias": "jobs", "ref": "", "allowed": ["search"]},
        {"kind": "mcp", "alias": "web", "allowed": ["open"]},  # no server at all
        {"kind": "ftp", "alias": "x", "ref": "t.py", "allowed": ["search"]},
        {"kind": "named_service", "namespaces": {"t": {"allowed": ["object.find", "*"]}}},
    ],
)
def test_it_skips_a_connection_the_runtime_cannot_load(connection: dict[str, Any]) -> None:
    resolution = resolve_agent(policy(connection), "main")
    assert configured(resolution) == []
    assert [t.tool_id for t in resolution.tools] == BUILTIN_IDS


# --- which tools ----------------------------------------------------------------------------------


def test_it_lists_configured_tools_in_order_then_the_builtins() -> None:
    data = policy(
        {"ref": "t.py", "alias": "jobs", "allowed": ["b", "a", "b"]},
        {"kind": "mcp", "server_id": "web", "alias": "web", "tools": ["open"]},
    )
    ids = [t.tool_id for t in resolve_agent(data, "main").tools]
    assert ids == ["jobs.b", "jobs.a", "mcp.web.open", *BUILTIN_IDS]


def test_it_offers_no_python_tool_for_an_empty_allowed_list() -> None:
    data = policy({"ref": "t.py", "alias": "jobs", "allowed": [], "tool_traits": {"a": {}}})
    assert configured(resolve_agent(data, "main")) == []


def test_it_takes_manifest_tools_and_trait_keys_for_a_wildcard_allowed_list() -> None:
    manifest = parse_manifest(
        {
            "jobs.search": {"tool_traits": {"strategy": ["exploration"]}},
            "jobs.export": {},
            "other.search": {},
            "jobs.deep.name": {},
        }
    )
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["*"],
            "tool_traits": {"launch": {"strategy": "neutral"}, "search": {}, "*": {}},
        }
    )
    resolution = resolve_agent(data, "main", manifest)
    # A tool_traits key is not a tool: without the manifest naming it, "launch" is not offered.
    assert configured(resolution) == ["jobs.search", "jobs.export"]
    assert tool(resolution, "jobs.search").strategy == ("exploration",)


def test_it_takes_every_tool_of_a_python_connection_without_allowed() -> None:
    manifest = parse_manifest({"jobs.search": {}, "jobs.export": {}})
    data = policy({"ref": "t.py", "alias": "jobs", "tool_traits": {"launch": {}}})
    assert configured(resolve_agent(data, "main", manifest)) == ["jobs.search", "jobs.export"]


@pytest.mark.parametrize("listed", [None, [], ["*"]])
def test_it_takes_every_tool_of_an_mcp_server_for_absent_empty_or_star(listed: Any) -> None:
    manifest = parse_manifest({"mcp.web.open": {}, "mcp.web.click": {}, "mcp.other.x": {}})
    connection: dict[str, Any] = {
        "kind": "mcp",
        "server_id": "web",
        "alias": "web",
        "tool_traits": {"close": {}, "web.scroll": {}, "*": {}, "other.thing": {}},
    }
    if listed is not None:
        connection["allowed"] = listed
    # The server's tools are the manifest's; trait keys name no new tool.
    assert configured(resolve_agent(policy(connection), "main", manifest)) == [
        "mcp.web.open",
        "mcp.web.click",
    ]


def test_it_lists_named_service_tools_in_the_modules_own_order() -> None:
    data = policy(
        {
            "kind": "named_service",
            "namespaces": {
                "task": {"allowed": ["object.search", "provider.capabilities", "object.find"]},
                "note": {"allowed_operations": ["object.upsert", "object.search", "*"]},
                "doc": {"operations": ["provider.about"]},
            },
        }
    )
    # The module's order (provider_about, …, search_objects, …, upsert_object), not the list's;
    # "*" in note's list makes every operation applicable there, but only listed callables load.
    assert configured(resolve_agent(data, "main")) == [
        "named_services.provider_about",
        "named_services.search_objects",
        "named_services.upsert_object",
    ]


def test_it_applies_named_service_traits_by_callable_never_by_operation_id() -> None:
    data = policy(
        {
            "kind": "named_service",
            "namespaces": {"task": {"allowed": ["object.search", "object.get"]}},
            "tool_traits": {
                "search_objects": {"strategy": ["exploration"]},
                "object.get": {"strategy": ["exploration"]},
            },
        }
    )
    resolution = resolve_agent(data, "main")
    assert tool(resolution, "named_services.search_objects").strategy == ("exploration",)
    assert tool(resolution, "named_services.get_object").strategy == ("unknown",)


# --- layers and provenance ------------------------------------------------------------------------


def test_config_replaces_a_manifest_key_whole_and_other_keys_survive() -> None:
    manifest = parse_manifest(
        {
            "jobs.launch": {
                "tool_traits": {"strategy": ["exploration"], "execution": EARLY, "owner": "a"}
            }
        }
    )
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["launch"],
            "tool_traits": {"launch": {"note": "x", "strategy": ["neutral"]}},
        }
    )
    launch = tool(resolve_agent(data, "main", manifest), "jobs.launch")
    assert dict(launch.traits) == {
        "strategy": ["neutral"],
        "execution": EARLY,
        "owner": "a",
        "note": "x",
    }
    # First-insertion order: the manifest's keys keep their places, new keys come last.
    assert list(launch.traits) == ["strategy", "execution", "owner", "note"]
    assert dict(launch.provenance) == {
        "strategy": "config agents.main.tools[0].tool_traits.launch",
        "execution": "manifest jobs.launch",
        "owner": "manifest jobs.launch",
        "note": "config agents.main.tools[0].tool_traits.launch",
    }
    assert launch.early is True


def test_a_config_execution_mapping_is_not_merged_with_the_manifest_one() -> None:
    manifest = parse_manifest({"jobs.launch": {"tool_traits": {"execution": EARLY}}})
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["launch"],
            "tool_traits": {"launch": {"strategy": "neutral", "execution": {"queue": "slow"}}},
        }
    )
    launch = tool(resolve_agent(data, "main", manifest), "jobs.launch")
    assert launch.traits["execution"] == {"queue": "slow"}
    assert launch.early is False


def test_an_empty_config_entry_is_ignored() -> None:
    manifest = parse_manifest({"jobs.search": {"tool_traits": {"strategy": ["exploration"]}}})
    data = policy(
        {"ref": "t.py", "alias": "jobs", "allowed": ["search"], "tool_traits": {"search": {}}}
    )
    search = tool(resolve_agent(data, "main", manifest), "jobs.search")
    assert search.strategy == ("exploration",)
    assert dict(search.provenance) == {"strategy": "manifest jobs.search"}


@pytest.mark.parametrize("value", [[], None, "", "bogus", 5])
def test_an_empty_or_invalid_config_strategy_overrides_to_unknown(value: Any) -> None:
    manifest = parse_manifest({"jobs.search": {"tool_traits": {"strategy": ["exploration"]}}})
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["search"],
            "tool_traits": {"search": {"strategy": value}},
        }
    )
    search = tool(resolve_agent(data, "main", manifest), "jobs.search")
    assert search.strategy == ("unknown",)
    assert search.provenance["strategy"] == "config agents.main.tools[0].tool_traits.search"


def test_builtins_are_listed_after_configured_tools_with_builtin_provenance() -> None:
    resolution = resolve_agent(policy(), "main")
    assert [t.tool_id for t in resolution.tools] == BUILTIN_IDS
    delegate = tool(resolution, "react.delegate")
    assert delegate.builtin is True
    assert delegate.connection_index is None
    assert delegate.early is True
    assert dict(delegate.provenance) == {
        "strategy": "builtin react.delegate",
        "execution": "builtin react.delegate",
    }
    expected = {
        "react.read": ("exploration",),
        "react.rg": ("exploration",),
        "react.write": ("exploitation",),
        "react.patch": ("exploitation",),
        "react.plan": ("neutral",),
    }
    for tool_id, strategy in expected.items():
        assert tool(resolution, tool_id).strategy == strategy
        assert tool(resolution, tool_id).early is False


def test_builtin_traits_cannot_be_changed_through_a_resolution() -> None:
    delegate = tool(resolve_agent(policy(), "main"), "react.delegate")
    with pytest.raises(TypeError):
        delegate.traits["strategy"] = ["exploitation"]  # type: ignore[index]
    assert tool(resolve_agent(policy(), "main"), "react.delegate").strategy == ("neutral",)


# --- MCP qualification and the wildcard surprise --------------------------------------------------


def browser(**traits: Any) -> dict[str, Any]:
    return {
        "kind": "mcp",
        "server_id": "browser",
        "alias": "browser",
        "allowed": ["open_page", "click", "close"],
        "tool_traits": traits,
    }


def test_the_mcp_wildcard_overrides_a_concrete_entry_for_the_same_key() -> None:
    data = policy(
        browser(
            click={"strategy": ["exploitation"], "note": "kept"},
            **{"*": {"strategy": ["exploration"]}},
        )
    )
    click = tool(resolve_agent(data, "main"), "mcp.browser.click")
    assert dict(click.traits) == {"strategy": ["exploration"], "note": "kept"}
    assert dict(click.provenance) == {
        "strategy": 'config agents.main.tools[0].tool_traits["*"]',
        "note": "config agents.main.tools[0].tool_traits.click",
    }


def test_a_literal_alias_wildcard_loses_to_star_but_beats_the_concrete_entry() -> None:
    data = policy(
        browser(
            **{
                "*": {"strategy": ["neutral"]},
                "browser.*": {"strategy": ["exploration"], "owner": "alias-star"},
                "click": {"strategy": ["exploitation"], "owner": "click", "note": "n"},
            }
        )
    )
    click = tool(resolve_agent(data, "main"), "mcp.browser.click")
    assert dict(click.traits) == {"strategy": ["neutral"], "owner": "alias-star", "note": "n"}


@pytest.mark.parametrize("key", ["click", "browser.click", "mcp.browser.click"])
def test_mcp_keys_are_qualified_before_matching(key: str) -> None:
    data = policy(browser(**{key: {"strategy": ["exploitation"]}}))
    assert tool(resolve_agent(data, "main"), "mcp.browser.click").strategy == ("exploitation",)


def test_an_mcp_key_for_another_alias_matches_nothing() -> None:
    data = policy(browser(**{"web.click": {"strategy": ["exploitation"]}}))
    assert tool(resolve_agent(data, "main"), "mcp.browser.click").strategy == ("unknown",)


def test_two_mcp_keys_naming_one_tool_keep_the_later_entry_whole() -> None:
    data = policy(
        browser(
            click={"strategy": ["exploitation"], "note": "first"},
            **{"mcp.browser.click": {"strategy": ["exploration"]}},
        )
    )
    click = tool(resolve_agent(data, "main"), "mcp.browser.click")
    assert dict(click.traits) == {"strategy": ["exploration"]}


# --- named-service namespace overrides ------------------------------------------------------------


def task_service() -> dict[str, Any]:
    return {
        "kind": "named_service",
        "alias": "svc",
        "namespaces": {
            "task": {
                "allowed": ["object.search", "object.upsert"],
                "tool_traits": {"search_objects": {"strategy": ["exploitation"]}},
            },
            "note": {"allowed": ["object.search"], "tool_traits": {"search_objects": {}}},
        },
        "tool_traits": {"search_objects": {"strategy": ["neutral"], "execution": EARLY}},
    }


def test_a_namespace_override_replaces_the_whole_trait_mapping() -> None:
    search = tool(resolve_agent(policy(task_service()), "main"), "svc.search_objects")
    assert search.early is True
    assert dict(search.traits_for({"namespace": "task", "query": "x"})) == {
        "strategy": ["exploitation"]
    }
    assert "execution" not in search.traits_for({"namespace": "task"})
    assert search.traits_for({"namespace": "other"}) == search.traits
    assert search.traits_for(None) == search.traits
    assert search.traits_for(["task"]) == search.traits
    # An empty override is ignored, like an empty config entry.
    assert search.traits_for({"namespace": "note"}) == search.traits
    assert list(search.namespace_overrides) == ["task"]


def test_the_resolver_answers_per_call_and_none_for_unknown_tools() -> None:
    resolve = resolve_agent(policy(task_service()), "main").resolver()
    assert resolve("svc.search_objects", {"namespace": "task"}) == {"strategy": ["exploitation"]}
    assert resolve(" svc.search_objects ", {})["strategy"] == ["neutral"]  # type: ignore[index]
    assert resolve("svc.nothing", {}) is None
    assert resolve("react.delegate", {})["execution"] == EARLY  # type: ignore[index]


# --- agents, odd shapes, duplicates ---------------------------------------------------------------


def test_it_lists_agents_and_refuses_an_unknown_one() -> None:
    data = policy(agent="main")
    data["surfaces"]["as_consumer"]["agents"]["helper"] = {"tools": []}
    assert agent_names(data) == ["main", "helper"]
    with pytest.raises(UnknownAgentError):
        resolve_agent(data, "nobody")
    assert agent_names({"surfaces": []}) == []


@pytest.mark.parametrize(
    "agent",
    [
        "not a mapping",
        {"tools": "not a list"},
        {"tools": ["a string", 5, None, ["x"]]},
        {"tools": [{"ref": "t.py", "alias": "a", "allowed": "search", "tool_traits": ["x"]}]},
        {"tools": [{"kind": ["mcp"], "alias": {"a": 1}}]},
        {"tools": [{"kind": "named_service", "namespaces": ["task"], "tool_traits": 3}]},
        {"tools": [{"kind": "named_service", "namespaces": {"t": {"allowed": "object.get"}}}]},
        {"tools": [{"kind": "mcp", "server_id": 7, "alias": None, "tool_traits": {1: 2}}]},
    ],
)
def test_it_does_not_raise_on_a_wrongly_shaped_agent(agent: Any) -> None:
    data = {"surfaces": {"as_consumer": {"agents": {"main": agent}}}}
    resolution = resolve_agent(data, "main")
    assert [t.tool_id for t in resolution.tools][-len(BUILTIN_IDS) :] == BUILTIN_IDS


def test_a_single_string_allowed_is_one_name() -> None:
    data = policy(
        {"ref": "t.py", "alias": "a", "allowed": "search", "tool_traits": {"x": {"strategy": 1}}}
    )
    assert configured(resolve_agent(data, "main")) == ["a.search"]


def test_two_connections_with_one_alias_list_their_tools_twice_with_the_later_traits() -> None:
    data = policy(
        {"ref": "a.py", "alias": "jobs", "allowed": ["search", "export"]},
        {
            "ref": "b.py",
            "alias": "jobs",
            "allowed": ["search"],
            "tool_traits": {"search": {"strategy": "exploration"}},
        },
    )
    resolution = resolve_agent(data, "main")
    assert configured(resolution) == ["jobs.search", "jobs.export"]
    # Each python connection loads the alias's whole allowed list: the model reads both twice.
    listed = [t.tool_id for t in resolution.listing if not t.builtin]
    assert listed == ["jobs.search", "jobs.export", "jobs.search", "jobs.export"]
    assert tool(resolution, "jobs.search").strategy == ("exploration",)


# --- effective JSON -------------------------------------------------------------------------------


def test_effective_json_shows_normalized_traits_provenance_and_eligibility() -> None:
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["launch"],
            "tool_traits": {
                "launch": {
                    "strategy": [" Neutral ", "bogus"],
                    "execution": {key: value.upper() for key, value in EARLY.items()},
                }
            },
            "tool_execution": {"launch": {"timeout_s": 5, "retry": "idempotency_key"}},
        },
        task_service(),
    )
    out = effective_json(resolve_agent(data, "main"))
    assert out["agent"] == "main"
    launch = out["tools"]["jobs.launch"]
    assert launch == {
        "traits": {"strategy": ["neutral"], "execution": EARLY},
        "provenance": {
            "strategy": "config agents.main.tools[0].tool_traits.launch",
            "execution": "config agents.main.tools[0].tool_traits.launch",
        },
        "early": True,
        "execution_design": {"timeout_s": 5, "retry": "idempotency_key"},
    }
    assert out["tools"]["svc.search_objects"]["namespace_overrides"] == {
        "task": {"strategy": ["exploitation"]}
    }
    assert "namespace_overrides" not in out["tools"]["svc.upsert_object"]
    assert list(out["tools"])[-1] == "react.delegate"


# --- manifest -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ([], "must be a JSON object"),
        ({"jobs.search": ["x"]}, "'jobs.search' must be an object"),
        ({"jobs.search": {"tool_traits": ["strategy"]}}, "tool_traits of manifest entry"),
        ({"": {}}, "non-empty string"),
    ],
)
def test_a_malformed_manifest_is_refused_with_one_sentence(data: Any, words: str) -> None:
    with pytest.raises(ManifestError, match=words) as caught:
        parse_manifest(data)
    message = str(caught.value)
    assert message.endswith(".")
    assert "\n" not in message


def test_the_manifest_lists_tools_per_alias_and_kind() -> None:
    manifest = parse_manifest(
        {"jobs.a": {}, "jobs.b.c": {}, "mcp.web.x": {}, "mcp.web.y.z": {}, "jobsx.a": {}}
    )
    assert manifest.callables_for("jobs", "python") == ["a"]
    assert manifest.callables_for("web", "mcp") == ["x", "y.z"]
    assert manifest.traits_for("jobs.a") == {}
    assert manifest.traits_for("nothing") is None
    assert Manifest.provenance("jobs.a") == "manifest jobs.a"


def test_effective_json_is_json_even_for_odd_yaml_values() -> None:
    when = datetime.date(2026, 7, 12)
    data = policy(
        {
            "ref": "t.py",
            "alias": "jobs",
            "allowed": ["search"],
            "tool_traits": {"search": {when: {1: when}, "strategy": "exploration"}},
            "tool_execution": {"search": {"since": when}},
        }
    )
    out = json.loads(json.dumps(effective_json(resolve_agent(data, "main"))))
    search = out["tools"]["jobs.search"]
    assert search["traits"] == {"2026-07-12": {"1": "2026-07-12"}, "strategy": ["exploration"]}
    assert search["execution_design"] == {"since": "2026-07-12"}


@pytest.mark.parametrize(
    ("role", "last"),
    [
        ("parent", ["react.plan", "react.delegate"]),
        ("child", ["react.plan", "react.contribute"]),
        (None, ["react.rg", "react.plan"]),
        ("none", ["react.rg", "react.plan"]),
    ],
)
def test_the_builtins_depend_on_the_agents_role(role: str | None, last: list[str]) -> None:
    resolution = resolve_agent(policy(), "main", role=role)
    assert [t.tool_id for t in resolution.tools][-2:] == last
    if role == "child":
        assert tool(resolution, "react.contribute").strategy == ("neutral",)


def test_an_agent_the_config_does_not_name_falls_back_to_main() -> None:
    data = policy({"ref": "t.py", "alias": "m", "allowed": ["a"]})
    resolution = resolve_consumer(data, "nobody")
    assert resolution.loaded_from == "main"
    assert configured(resolution) == ["m.a"]


def test_a_wildcard_wins_over_a_concrete_entry_on_python_connections_too() -> None:
    data = policy(
        {
            "ref": "t.py",
            "alias": "m",
            "allowed": ["a"],
            "tool_traits": {"a": {"strategy": "exploration", "k": 1}, "*": {"strategy": "neutral"}},
        }
    )
    traits = tool(resolve_agent(data, "main"), "m.a").normalized_traits
    assert traits == {"strategy": ["neutral"], "k": 1}


def test_a_dotted_key_reaches_the_tool_of_another_connection() -> None:
    data = policy(
        {
            "ref": "t.py",
            "alias": "ya",
            "allowed": ["x"],
            "tool_traits": {"yb.u": {"strategy": "exploitation"}},
        },
        {"ref": "t.py", "alias": "yb", "allowed": ["u"]},
    )
    assert tool(resolve_agent(data, "main"), "yb.u").strategy == ("exploitation",)
