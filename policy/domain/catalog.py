"""The catalog preview: the Scope block the runtime writes into the model's tool catalog (§2.7).

The text must match the runtime byte for byte, so the admin reads exactly what the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from policy.domain.loading import runtime_traits

SCOPE_HEADER: Final = "   Scope:\n"
TRAIT_INDENT: Final = " " * 7 + "\u2022 "
OVERRIDE_INDENT: Final = " " * 11 + "- "


class ScopedTool(Protocol):
    """What the catalog needs of a tool (``resolution.EffectiveTool`` has it)."""

    @property
    def tool_id(self) -> str: ...
    @property
    def traits(self) -> Mapping[str, Any]: ...
    @property
    def namespace_overrides(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def namespaces_applicable(self) -> tuple[str, ...]: ...


#: One catalog entry: the model-facing tool id, its resolved traits, its namespace overrides and
#: (for named-service tools) the namespaces it applies to.
CatalogEntry = (
    tuple[str, Mapping[str, Any] | None, Mapping[str, Mapping[str, Any]] | None]
    | tuple[str, Mapping[str, Any] | None, Mapping[str, Mapping[str, Any]] | None, Sequence[str]]
)


def _shown(value: Any) -> bool:
    # The runtime drops parts whose text is empty: None, "", 0, False and blank strings.
    return bool(str(value or "").strip())


def render_value(value: Any) -> str:
    """A trait value as the runtime prints it: lists joined with ``", "``, mappings as ``k=v``
    pairs, anything else through ``str``; parts that print empty (``None``, ``""``, ``0``,
    ``False``, blanks) are skipped, and a value with nothing left prints as ``""``."""
    if isinstance(value, Mapping):
        return ", ".join(
            f"{key}={item}" for key, item in value.items() if _shown(key) and _shown(item)
        )
    items = value if isinstance(value, list) else [value]
    return ", ".join(str(item) for item in items if _shown(item))


def render_scope(
    traits: Mapping[str, Any],
    namespace_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    namespaces: Sequence[str] = (),
) -> str:
    """The Scope block of one tool, or ``""`` when there is nothing to render.

    As the runtime renders it: the ``namespaces applicable`` line of a named-service tool, then
    its traits normalized, in mapping order (a trait whose value prints empty has no line); with
    namespace overrides the default strategy line says ``(default)`` and an overrides block lists
    each namespace's strategy (an override without a strategy has no line there).
    """
    lines = scope_block(traits, namespace_overrides, namespaces)
    return "".join(f"{line}\n" for line in lines)


def scope_block(
    traits: Mapping[str, Any],
    namespace_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    namespaces: Sequence[str] = (),
) -> list[str]:
    """:func:`render_scope` as a list of lines (without line ends)."""
    normalized = runtime_traits(traits)
    overrides = {
        ns: runtime_traits(override)
        for ns, override in (namespace_overrides or {}).items()
        if runtime_traits(override)
    }
    if not normalized and not namespaces:
        return []
    lines = [SCOPE_HEADER.rstrip("\n")]
    if namespaces:
        lines.append(f"{TRAIT_INDENT}namespaces applicable: {', '.join(map(str, namespaces))}")
    for key, value in normalized.items():
        text = render_value(value)
        if not text:
            continue
        suffix = " (default)" if key == "strategy" and overrides else ""
        lines.append(f"{TRAIT_INDENT}{key}: {text}{suffix}")
    if overrides:
        lines.append(f"{TRAIT_INDENT}strategy overrides by namespace:")
        for namespace, override in overrides.items():
            text = render_value(override.get("strategy"))
            if text:
                lines.append(f"{OVERRIDE_INDENT}{namespace}: {text}")
    return lines


def scope_lines(tool: ScopedTool) -> list[str]:
    """The Scope block of a resolved tool as the model reads it, one line per item."""
    return scope_block(tool.traits, tool.namespace_overrides, tool.namespaces_applicable)


def catalog_entries(tools: Sequence[ScopedTool]) -> list[CatalogEntry]:
    """The catalog entries of resolved tools (pass ``resolution.listing``: the runtime's list)."""
    return [
        (t.tool_id, t.traits, t.namespace_overrides, tuple(t.namespaces_applicable)) for t in tools
    ]


def render_catalog(entries: Sequence[CatalogEntry]) -> str:
    """The catalog preview: ``[n] tool_id``, its Scope block (if any) and a blank line per tool."""
    parts: list[str] = []
    for number, entry in enumerate(entries, start=1):
        tool_id, traits, overrides = entry[0], entry[1], entry[2]
        namespaces: Sequence[str] = entry[3] if len(entry) > 3 else ()
        parts.append(f"[{number}] {tool_id}\n")
        parts.append(render_scope(traits or {}, overrides, namespaces))
        parts.append("\n")
    return "".join(parts)
