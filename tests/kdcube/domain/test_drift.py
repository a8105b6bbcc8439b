"""What changed in KDCube's owned subtree, named down to the trait, with values shown only for
the allow-list (KDCube resolves env:/file: references anywhere in props)."""

from __future__ import annotations

import copy
import json
from typing import Any

from engine.catalog.multi_action import inert_mode_keys
from kdcube.domain.drift import changes, lines, redacted
from tests.kdcube.kdcube_replay import exchange

KEY = b"test-key"


def props(case: str) -> dict[str, Any]:
    return dict(exchange(case)["response"]["json"]["props"])


def subtree(data: dict[str, Any]) -> Any:
    return redacted(data["surfaces"]["as_consumer"], KEY)


def texts(before: Any, after: Any, **kw: Any) -> list[str]:
    return [c.text for c in changes(subtree(before), subtree(after), **kw)]


def test_the_recorded_outside_change_is_one_trait() -> None:
    assert texts(props("push-read-back"), props("drift-read")) == [
        "`main` → connection `web` → `web_search`: strategy [exploration] → [exploitation]"
    ]


def test_a_value_off_the_allow_list_changes_without_its_content() -> None:
    before = props("push-read-back")
    after = copy.deepcopy(before)
    server = after["surfaces"]["as_consumer"]["mcp"]["services"]["mcpServers"]["knowledge"]
    server["headers"]["X-Api-Key"] = "resolved-new-secret"
    server["url"] = "http://10.0.0.1/mcp"
    tools = after["surfaces"]["as_consumer"]["agents"]["main"]["tools"]
    tools[0]["module"] = "some.other.module"
    found = changes(subtree(before), subtree(after))
    shown = [c.text for c in found]
    assert "mcp.services.mcpServers.knowledge.headers.X-Api-Key: a value changed" in shown
    assert "mcp.services.mcpServers.knowledge.url: a value changed" in shown
    assert f"`main` → connection `{tools[0]['name']}`: module: a value changed" in shown
    dumped = json.dumps([c.as_dict() for c in found]) + json.dumps(subtree(after))
    for secret in ("resolved-new-secret", "resolved-knowledge-secret", "10.0.0.1", "some.other"):
        assert secret not in dumped
    assert all(c.before is None and c.after is None for c in found)


def test_added_and_removed_connections_tools_and_agents_are_named() -> None:
    before = props("push-read-back")
    after = copy.deepcopy(before)
    agents = after["surfaces"]["as_consumer"]["agents"]
    tools = agents["main"]["tools"]
    removed = tools.pop()
    tools.append({"name": "gmail2", "kind": "python", "module": "m", "allowed": ["send"]})
    web = next(t for t in tools if t["name"] == "web")
    web["tool_traits"]["web_crawl"] = {"strategy": ["neutral"]}
    web["allowed"] = [*web.get("allowed", []), "web_crawl"]
    agents["helper"] = {"tools": []}
    shown = texts(before, after)
    assert f"`main` → connection `{removed['name']}` removed" in shown
    assert "`main` → connection `gmail2` added" in shown
    assert "`main` → connection `web` → `web_crawl`: traits added" in shown
    assert any(line.startswith("`main` → connection `web`: allowed [") for line in shown)
    assert "agent `helper` added" in shown


def test_at_most_twenty_lines_then_and_n_more() -> None:
    before = {"agents": {"main": {"tools": [{"name": "t", "tool_traits": {}}]}}}
    after = copy.deepcopy(before)
    after["agents"]["main"]["tools"][0]["tool_traits"] = {
        f"tool{i:02}": {"strategy": ["neutral"]} for i in range(25)
    }
    found = changes(redacted(before, KEY), redacted(after, KEY))
    shown = lines(found)
    assert len(shown) == 21
    assert shown[-1] == "and 5 more"


def test_the_widgets_stale_tools_save_is_named_once() -> None:
    version = exchange("push-read-back")["traitdeck"]["version"]["surfaces"]["as_consumer"]
    found = changes(
        subtree(props("widget-push-read-back")),
        subtree(props("widget-stale-read")),
        version=redacted(version, KEY),
        version_number=4,
    )
    shown = [c.text for c in found]
    assert shown[0] == "the tools of `main` were replaced: 2 traits of version 4 are gone"
    assert sum("were replaced" in s for s in shown) == 1
    assert "`main` → connection `rendering` added" in shown


def test_the_widgets_multi_action_switch_is_found_through_the_react_walk() -> None:
    recorded = props("widget-multi-action-read")
    assert inert_mode_keys(recorded, ["main"]) == ["react.agents.main.multi_action_mode"]
    # The widget writes react.<agent> when the agent lives there (api.ts writeAgentSection).
    direct = {"react": {"main": {"multi_action_mode": "on"}}}
    assert inert_mode_keys(direct, ["main"]) == ["react.main.multi_action_mode"]
    # A profile's multi_action_mode is read by the runtime: not inert.
    profile = {
        "react": {
            "main": {"instruction_profiles": {"options": [{"id": "a", "multi_action_mode": "on"}]}}
        }
    }
    assert inert_mode_keys(profile, ["main"]) == []
