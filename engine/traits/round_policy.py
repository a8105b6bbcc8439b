"""What the runtime knows about tools while it runs a round: each call's trait mapping (with the
named-service namespace override for its params) and whether the tool exists at all.

The runtime resolves a call's traits in this order (its ``_tool_traits_for_id``): a namespace
override when ``params.namespace`` (lower-cased, trailing ``:`` stripped; a sub-scope ``mem:notes``
falls back to ``mem``) has one; else the tool's own traits when it has any; else the built-in
``react.*`` traits of that id (for either agent role); else nothing (unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from engine.traits.builtins import BUILTIN_TOOLS, builtin_traits
from engine.traits.traits import normalize_traits


class ToolLike(Protocol):
    @property
    def tool_id(self) -> str: ...
    @property
    def traits(self) -> Mapping[str, Any]: ...
    @property
    def namespace_overrides(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def builtin(self) -> bool: ...


def _namespace_key(value: Any) -> str:
    return str(value or "").strip().lower().rstrip(":")


def namespace_override(
    overrides: Mapping[str, Mapping[str, Any]], params: Any
) -> Mapping[str, Any] | None:
    """The override a call's ``params.namespace`` selects, as the runtime looks it up: the
    namespace lower-cased with trailing ``:`` stripped, then its base (``mem:notes`` → ``mem``);
    override keys are compared the same way. ``None``: the tool's default traits apply."""
    if not overrides or not isinstance(params, Mapping):
        return None
    full = _namespace_key(params.get("namespace"))
    base = full.split(":", 1)[0].strip()
    if not base:
        return None
    by_key: dict[str, Mapping[str, Any]] = {}
    for key, value in overrides.items():
        if _namespace_key(key) and isinstance(value, Mapping) and value:
            by_key[_namespace_key(key)] = value
    return by_key.get(full) or by_key.get(base)


@dataclass(frozen=True)
class RoundPolicy:
    """The configured (non-built-in) tools of one agent, by model-facing id."""

    traits_by_id: Mapping[str, Mapping[str, Any]]
    overrides_by_id: Mapping[str, Mapping[str, Mapping[str, Any]]]

    @classmethod
    def of(cls, tools: Iterable[ToolLike]) -> RoundPolicy:
        traits: dict[str, Mapping[str, Any]] = {}
        overrides: dict[str, Mapping[str, Mapping[str, Any]]] = {}
        for tool in tools:
            if tool.builtin:
                continue
            traits[tool.tool_id] = normalize_traits(tool.traits)
            by_ns: dict[str, Mapping[str, Any]] = {}
            for namespace, override in tool.namespace_overrides.items():
                key = _namespace_key(namespace)
                normalized = normalize_traits(override) if isinstance(override, Mapping) else {}
                # Later entries win, as in the runtime's dict rebuild.
                if key and normalized:
                    by_ns[key] = normalized
            if by_ns:
                overrides[tool.tool_id] = by_ns
        return cls(traits, overrides)

    def known(self, tool_id: str) -> bool:
        """Whether the runtime's protocol check knows the tool: configured, or a ``react.*``
        built-in of either role."""
        return tool_id in self.traits_by_id or tool_id in _BUILTIN_IDS

    def traits(self, tool_id: str, params: Any = None) -> Mapping[str, Any]:
        """The trait mapping of one call; ``params=None`` is the overseer's view while streaming
        (it identifies an action before its params arrive)."""
        tid = tool_id.strip()
        if not tid:
            return {}
        found = namespace_override(self.overrides_by_id.get(tid, {}), params)
        if found:
            return found
        own = self.traits_by_id.get(tid)
        if own:
            return own
        return builtin_traits(tid) or {}


_BUILTIN_IDS = frozenset(tool.tool_id for tool in BUILTIN_TOOLS)
