"""The runtime's own tools: the read-only ``react`` connection every agent has (DESIGN §2.6).

They are fixed by the runtime. Traitdeck shows them read-only, after the configured tools, and they
form the lowest trait layer (``builtin``) of resolution.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from core.vocabulary import EARLY_PROFILE, EXPLOITATION, EXPLORATION, NEUTRAL

BUILTIN_ALIAS: Final = "react"


@dataclass(frozen=True)
class BuiltinTool:
    callable: str
    traits: Mapping[str, Any]

    @property
    def tool_id(self) -> str:
        return f"{BUILTIN_ALIAS}.{self.callable}"

    @property
    def provenance(self) -> str:
        return f"builtin {self.tool_id}"


def _tool(name: str, *strategy: str, early: bool = False) -> BuiltinTool:
    traits: dict[str, Any] = {"strategy": list(strategy)}
    if early:
        traits["execution"] = dict(EARLY_PROFILE)
    return BuiltinTool(callable=name, traits=MappingProxyType(traits))


#: Every built-in, in the order the runtime lists them; the last two depend on the agent's role.
BUILTIN_TOOLS: Final[tuple[BuiltinTool, ...]] = (
    _tool("read", EXPLORATION),
    _tool("pull", EXPLORATION),
    _tool("checkout", EXPLORATION),
    _tool("write", EXPLOITATION),
    _tool("patch", EXPLOITATION),
    _tool("memsearch", EXPLORATION),
    _tool("hide", NEUTRAL),
    _tool("rg", EXPLORATION),
    _tool("plan", NEUTRAL),
    # react.delegate is the first built-in user of the early profile, not a hard-coded exception.
    _tool("delegate", NEUTRAL, early=True),
    _tool("contribute", NEUTRAL),
)

#: The agent roles the runtime distinguishes: a parent (it has a sub-agent spawner) is offered
#: react.delegate, a child (a sub-agent) react.contribute, an agent with neither neither.
#: The runtime decides the role from how the agent is run, not from the YAML.
ROLES: Final = ("parent", "child", "none")
DEFAULT_ROLE: Final = "parent"
_ROLE_TOOL: Final[Mapping[str, str]] = {"parent": "delegate", "child": "contribute"}


def builtins_for_role(role: str | None) -> tuple[BuiltinTool, ...]:
    """The built-ins an agent of this role is offered, in the runtime's order. ``None`` and
    ``"none"`` mean an agent that neither delegates nor contributes."""
    extra = _ROLE_TOOL.get(role or "none")
    return tuple(
        tool
        for tool in BUILTIN_TOOLS
        if tool.callable not in _ROLE_TOOL.values() or tool.callable == extra
    )


_BY_ID: Final[Mapping[str, BuiltinTool]] = {tool.tool_id: tool for tool in BUILTIN_TOOLS}


def builtin_tool(tool_id: str) -> BuiltinTool | None:
    """The built-in tool with this model-facing id (``react.delegate``), if there is one."""
    return _BY_ID.get(tool_id)


def builtin_traits(tool_id: str) -> dict[str, Any] | None:
    """A fresh copy of a built-in tool's trait mapping (callers may not change the original)."""
    tool = _BY_ID.get(tool_id)
    if tool is None:
        return None
    return {
        key: dict(value) if isinstance(value, Mapping) else list(value)
        for key, value in tool.traits.items()
    }
