"""The react config blocks in the order the runtime walks them
(``base_workflow._iter_react_config_blocks`` at the recorded commit)."""

from __future__ import annotations

from policy.domain.multi_action import profile_mode, react_config_blocks


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
