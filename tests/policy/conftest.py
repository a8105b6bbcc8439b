"""Shared helpers of the policy tests: put agents or connections in the draft, and read the draft
back as the runtime reads its export (imported by the test modules, as ``tests.conftest``'s
``make_user`` is)."""

from __future__ import annotations

from typing import Any

import yaml

# Imports of Django code stay inside the helpers: the domain tests under tests/policy/domain load
# this file without Django.


def seed_agents(**agents: Any) -> int:
    """Make the draft hold these agents; returns its revision."""
    from policy.services import draft_change

    doc = {"surfaces": {"as_consumer": {"agents": agents}}}
    return draft_change(edit=lambda _old: doc, base_revision=None).revision


def seed_connections(*connections: dict[str, Any]) -> int:
    """Make the draft hold one agent, ``main``, with these connections; returns its revision."""
    return seed_agents(main={"tools": list(connections)})


def exported_agents() -> dict[str, Any]:
    """The draft's agents as the runtime reads the exported YAML."""
    from policy.selectors import draft_state

    data = yaml.safe_load(draft_state().text)
    value: dict[str, Any] = data["surfaces"]["as_consumer"]["agents"]
    return value


def exported_connections(agent: str = "main") -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = exported_agents()[agent]["tools"]
    return value


def tool_rows(page: str, tool_id: str) -> list[Any]:
    """One tool's row on the agent page and the rows under it (namespace overrides, its
    diagnostics) up to the next tool's row, parsed (:class:`tests.markup.Element`)."""
    from tests.markup import document

    everything = document(page).iter()
    [row] = [element for element in everything if element.attrs.get("data-tool") == tool_id]
    [body] = [element for element in everything if row in element.children]
    rows = [row]
    for after in body.children[body.children.index(row) + 1 :]:
        if "data-tool" in after.attrs:
            break
        rows.append(after)
    return rows


def diagnostic_codes(*elements: Any) -> list[str]:
    """The codes of the diagnostics listed inside these parsed elements, in page order."""
    return [item.attrs["data-code"] for e in elements for item in e.find_all("li", data_code=None)]
