"""The web's size caps (``policy-too-large``): how many agents, connections and tools a policy
names, and which caps a change would push it over. The ``traitdeck`` CLI has no caps: only the
web (import and editing, pages and API) passes caps in.

A change is refused for a count that ends over its cap **and** higher than before, so a draft
already over a cap (imported with ``manage.py policy import``, or a cap lowered since) can still
be shrunk from the web.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from engine.document.diagnostics import Diagnostic, Severity, sort_for_display
from engine.document.paths import AGENTS, format_path
from engine.tools.connections import NAMESPACE_LIST_KEYS
from engine.tools.resolution import agents_mapping
from policy.domain.analysis import Analysis

CODE: Final = "policy-too-large"
AGENTS_COUNT: Final = "agents"
CONNECTIONS_COUNT: Final = "connections"
TOOLS_COUNT: Final = "tools"


@dataclass(frozen=True)
class Cap:
    """At most ``limit`` of ``what`` (``agents``, ``connections`` or ``tools``), set by
    ``setting`` (named in the diagnostic, so the admin knows what to raise)."""

    what: str
    limit: int
    setting: str


@dataclass(frozen=True)
class PolicySize:
    agents: int
    connections: int
    #: Distinct tool names per connection: its ``allowed``/``tools`` items, its ``tool_traits``
    #: and ``tool_execution`` keys and its namespaces' operations.
    tools: int

    def of(self, what: str) -> int:
        counts: dict[str, int] = {
            AGENTS_COUNT: self.agents,
            CONNECTIONS_COUNT: self.connections,
            TOOLS_COUNT: self.tools,
        }
        return counts[what]


def policy_size(data: Any) -> PolicySize:
    """What a policy document names, read as leniently as the runtime reads it."""
    agents = agents_mapping(data)
    connections = 0
    tools = 0
    for agent in agents.values():
        listed = agent.get("tools") if isinstance(agent, Mapping) else None
        if not isinstance(listed, list):
            continue
        connections += len(listed)
        tools += sum(_tool_names(raw) for raw in listed if isinstance(raw, Mapping))
    return PolicySize(agents=len(agents), connections=connections, tools=tools)


def _tool_names(raw: Mapping[Any, Any]) -> int:
    names: set[str] = set()
    for key in ("allowed", "tools"):
        items = raw.get(key)
        if isinstance(items, list):
            names.update(str(item).strip() for item in items)
    for key in ("tool_traits", "tool_execution"):
        block = raw.get(key)
        if isinstance(block, Mapping):
            names.update(str(name).strip() for name in block)
    namespaces = raw.get("namespaces")
    if isinstance(namespaces, Mapping):
        for namespace, block in namespaces.items():
            if not isinstance(block, Mapping):
                continue
            for key in NAMESPACE_LIST_KEYS:
                items = block.get(key)
                if isinstance(items, list):
                    names.update(f"{namespace}:{str(item).strip()}" for item in items)
    return len(names)


def over_caps(data: Any, caps: Sequence[Cap], *, before: Any = None) -> list[Diagnostic]:
    """One ``policy-too-large`` error per cap ``data`` exceeds (and, given the document
    ``before`` the change, exceeds by more than it already did)."""
    if not caps:
        return []
    size = policy_size(data)
    old = policy_size(before) if before is not None else None
    found = []
    for cap in caps:
        count = size.of(cap.what)
        if count <= cap.limit or (old is not None and count <= old.of(cap.what)):
            continue
        found.append(
            Diagnostic(
                Severity.ERROR,
                CODE,
                format_path(AGENTS),
                None,
                None,
                f"the policy names {count} {cap.what}; the web takes at most {cap.limit}"
                f" ({cap.setting})",
                f"split the policy, or raise {cap.setting} on the server (the traitdeck CLI"
                " has no caps)",
            )
        )
    return found


def refuse_over_caps(analysis: Analysis, caps: Sequence[Cap], *, before: Any = None) -> Analysis:
    """``analysis``, refused (with the ``policy-too-large`` errors) when its policy is over a
    cap; unchanged otherwise."""
    if analysis.refused:
        return analysis
    found = over_caps(analysis.data, caps, before=before)
    if not found:
        return analysis
    loaded = replace(
        analysis.loaded,
        data=None,
        refused=True,
        diagnostics=[*analysis.loaded.diagnostics, *found],
    )
    return Analysis(loaded=loaded, diagnostics=sort_for_display([*analysis.diagnostics, *found]))
