"""The one tool an edit names (agent, connection index, ``tool_traits`` key, namespace) and the
edit that writes its trait mapping and execution design.

The browser's tool editor and the API's ``PUT …/tools/{key}`` both find their target here, so a
key means the same row on both paths (an MCP entry keyed ``mcp.A.T`` is edited in place, the
wildcard under its own key, a namespace override inside its namespace).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.tools.connections import MCP, NAMED_SERVICE, WILDCARD, Connection
from engine.tools.resolution import AgentResolution, EffectiveTool
from policy.domain.edits import set_tool, tool_entries
from policy.domain.placement import entry_keys, key_target, tool_rows

Edit = Callable[[dict[str, Any]], dict[str, Any]]
#: From the entry as written (``None``: none yet) to the entry to write.
TraitsChange = Callable[[dict[str, Any] | None], Mapping[str, Any] | None]


class UnknownToolError(LookupError):
    """The agent has no such loadable connection, tool row or namespace (a plain sentence)."""


@dataclass(frozen=True)
class ToolTarget:
    """The tool an edit names: ``key`` as the caller wrote it, ``name`` the row (callable or
    ``*``), and the keys its entries live under."""

    agent: str
    index: int
    key: str
    name: str
    trait_key: str
    design_key: str
    namespace: str | None
    connection: Connection
    tool: EffectiveTool | None

    @property
    def with_design(self) -> bool:
        """A namespace override and the MCP wildcard carry traits only (DESIGN §2.8 is per tool)."""
        return self.namespace is None and self.name != WILDCARD

    @property
    def tool_id(self) -> str:
        return self.connection.tool_id(self.name)

    def entries(self, doc: Mapping[str, Any]) -> tuple[dict[str, Any] | None, Any]:
        return tool_entries(
            doc,
            self.agent,
            self.index,
            self.trait_key,
            design_key=self.design_key,
            namespace=self.namespace,
        )

    def edit(self, traits: TraitsChange, design: TraitsChange) -> Edit:
        """The edit applying ``traits`` and (where the target has one) ``design`` to whatever
        the document holds for the tool when the edit runs. Raises ``EditError``."""

        def apply(doc: dict[str, Any]) -> dict[str, Any]:
            old_traits, old_design = self.entries(doc)
            return set_tool(
                doc,
                self.agent,
                self.index,
                self.trait_key,
                traits=traits(old_traits),
                design=design(old_design) if self.with_design else old_design,
                namespace=self.namespace,
                design_key=self.design_key,
            )

        return apply


def find_tool(
    resolution: AgentResolution, index: int, key: str, namespace: str | None = None
) -> ToolTarget:
    """The tool row ``key`` names on connection ``index``; raises ``UnknownToolError``."""
    agent = resolution.agent
    connection = resolution.connection(index)
    if connection is None or not connection.loadable:
        raise UnknownToolError(f"Agent {agent!r} has no loadable connection #{index + 1}.")
    name = key_target(connection, key)
    is_wildcard = connection.kind == MCP and name == WILDCARD
    if name is None or not (is_wildcard or name in tool_rows(connection)):
        raise UnknownToolError(f"Connection #{index + 1} of {agent!r} offers no tool {key!r}.")
    if namespace is not None:
        names = [ns.name for ns in connection.namespaces]
        if connection.kind != NAMED_SERVICE or namespace not in names:
            raise UnknownToolError(f"Connection #{index + 1} has no namespace {namespace!r}.")
    trait_key, design_key = entry_keys(connection, name)
    if key in connection.traits_raw():
        trait_key = key
    tool = None if is_wildcard else resolution.find(connection.tool_id(name))
    return ToolTarget(agent, index, key, name, trait_key, design_key, namespace, connection, tool)
