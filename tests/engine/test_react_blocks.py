"""The react config blocks in the order the runtime walks them
(``base_workflow._iter_react_config_blocks`` at the recorded commit)."""

from __future__ import annotations

from engine.catalog.multi_action import (
    ProfileSet,
    applied_profile,
    catalog_form,
    instruction_profiles,
    profile_mode,
    react_config_blocks,
    react_lookup,
)


def _paths(data: object, agent: str) -> list[str]:
    return [path for path, _block in react_config_blocks(data, agent)]


def test_it_walks_each_key_direct_then_under_agents_then_the_root_over_both_roots() -> None:
    data = {
        "react": {
            "my-agent": {},
            "agents": {"my-agent": {}, "my_agent": {}, "default": {}},
            "default_agent": {},
        },
        "config": {"react": {"my_agent": {}}},
    }
    assert _paths(data, "my-agent") == [
        "react.my-agent",
        "react.agents.my-agent",
        "react.agents.my_agent",
        "react.default_agent",
        "react.agents.default",
        "react",
        "config.react.my_agent",
        "config.react",
    ]


def test_it_reads_a_profile_under_react_agents() -> None:
    data = {
        "react": {
            "agents": {
                "main": {
                    "instruction_profiles": {
                        "default": "fast",
                        "options": [{"id": "fast", "multi_action_mode": "safe_fanout"}],
                    }
                }
            }
        }
    }
    assert profile_mode(data, "main") == "safe_fanout"


def test_it_finds_no_blocks_without_a_react_root() -> None:
    assert _paths({"react": ["not", "a", "mapping"]}, "main") == []


def _profiles(default: object, *options: dict[str, object]) -> dict[str, object]:
    return {"instruction_profiles": {"default": default, "options": list(options)}}


def test_the_first_block_with_profile_options_wins_and_its_default_must_be_its_own() -> None:
    # Recorded (conformance family `react`): the runtime offers the first block's profiles only;
    # a default naming another block's id is no default at all.
    data = {
        "react": {
            "main": _profiles("fast", {"id": "full"}),
            "default": _profiles("fast", {"id": "fast", "multi_action_mode": "on"}),
        }
    }
    assert instruction_profiles(data, "main") == ProfileSet(
        ("full",), None, "react.main.instruction_profiles"
    )
    assert applied_profile(data, "main") is None
    assert profile_mode(data, "main") is None
    # A pick the first block does not offer is no pick.
    assert profile_mode(data, "main", "fast") is None


def test_a_profile_mode_is_trimmed_and_an_empty_one_is_off() -> None:
    data = {
        "react": {
            "main": _profiles(
                "a", {"id": "a", "multi_action_mode": "  "}, {"id": "b", "multi_action_mode": True}
            )
        }
    }
    assert profile_mode(data, "main") == "off"
    assert profile_mode(data, "main", " b ") == "True"


def test_the_catalog_form_takes_the_first_value_found_even_when_invalid() -> None:
    data = {
        "react": {
            "main": {"instructions": {"tool_catalog_detail": "wide"}},
            "default": {"instructions": {"tool_catalog_detail": "compact"}},
        }
    }
    form = catalog_form(data, "main")
    assert (form.detail, form.detail_source) == (
        "full",
        "react.main.instructions.tool_catalog_detail",
    )
    # KDCube's picker skips the invalid value and shows compact as the default.
    assert form.picker_default == "compact"
    assert catalog_form(data, "main", detail=" Compact ").detail == "compact"


def test_a_profile_catalog_value_is_trimmed_but_not_lower_cased() -> None:
    data = {
        "react": {
            "main": {
                **_profiles("p", {"id": "p", "tool_catalog_detail": "Compact"}),
                "instructions": {"tool_catalog_detail": "compact"},
            }
        }
    }
    assert catalog_form(data, "main").detail == "full"
    block = {"react": {"main": {"instructions": {"tool_catalog_detail": " Compact "}}}}
    assert catalog_form(block, "main").detail == "compact"


def test_the_whole_react_root_is_read_before_config_react() -> None:
    data = {
        "react": {"instructions": {"include_tool_catalog": "yes"}},
        "config": {"react": {"main": {"instructions": {"include_tool_catalog": False}}}},
    }
    form = catalog_form(data, "main")
    assert (form.include, form.include_source) == (True, "react.instructions.include_tool_catalog")
    assert react_lookup(data, "main", "instructions.include_tool_catalog") == (
        "yes",
        "react.instructions.include_tool_catalog",
    )


def test_an_empty_agent_id_walks_the_runtime_default_agent_id() -> None:
    assert _paths({"react": {"default.react.agent": {}}}, " ") == [
        "react.default.react.agent",
        "react",
    ]


def test_kdcubes_roster_reads_react_agents_then_the_roots_agent_keys_only() -> None:
    from engine.catalog.multi_action import react_agent_keys

    data = {
        "react": {
            "agents": {"a": {}, "b": "not a block"},
            "instructions": {},
            "instruction_profiles": {},
            "model": {},
            "c": {},
            "default_agent": {},
        },
        "config": {"react": {"d": {}}},
    }
    assert react_agent_keys(data) == [("a", "agents"), ("c", "root"), ("default_agent", "root")]
    assert react_agent_keys({"config": {"react": {"d": {}}}}) == []
