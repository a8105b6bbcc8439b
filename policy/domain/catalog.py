"""The catalog preview: the Scope block the runtime writes into the model's tool catalog (§2.7).

The text must match the runtime byte for byte, so the admin reads exactly what the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from policy.domain.traits import normalize_strategy, normalize_traits

SCOPE_HEADER: Final = "   Scope:\n"
TRAIT_INDENT: Final = " " * 7 + "\u2022 "
OVERRIDE_INDENT: Final = " " * 11 + "- "

#: One catalog entry: the model-facing tool id, its resolved traits, its namespace overrides.
CatalogEntry = tuple[str, Mapping[str, Any] | None, Mapping[str, Mapping[str, Any]] | None]


def render_value(value: Any) -> str:
    """A trait value as the runtime prints it: lists joined with ``", "``, mappings as ``k=v``
    pairs (pairs with an empty key or value skipped), anything else through ``str``."""
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    if isinstance(value, Mapping):
        return ", ".join(
            f"{key}={item}" for key, item in value.items() if not _empty(key) and not _empty(item)
        )
    return str(value)


def _empty(value: Any) -> bool:
    return value is None or value == ""


def render_scope(
    traits: Mapping[str, Any],
    namespace_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The Scope block of one tool, or ``""`` when there is nothing to render.

    Traits are rendered normalized (as the runtime reads them), in mapping order. With namespace
    overrides, the default strategy line says ``(default)`` and an overrides block lists each
    namespace's strategy after the trait lines.
    """
    normalized = normalize_traits(traits)
    overrides = namespace_overrides or {}
    if not normalized and not overrides:
        return ""
    lines = [SCOPE_HEADER]
    for key, value in normalized.items():
        suffix = " (default)" if key == "strategy" and overrides else ""
        lines.append(f"{TRAIT_INDENT}{key}: {render_value(value)}{suffix}\n")
    if overrides:
        lines.append(f"{TRAIT_INDENT}strategy overrides by namespace:\n")
        for namespace, override in overrides.items():
            # An override replaces the whole trait mapping, so one without strategy is unknown.
            raw = override.get("strategy") if isinstance(override, Mapping) else None
            values = ", ".join(normalize_strategy(raw))
            lines.append(f"{OVERRIDE_INDENT}{namespace}: {values}\n")
    return "".join(lines)


def render_catalog(entries: Sequence[CatalogEntry]) -> str:
    """The catalog preview: ``[n] tool_id``, its Scope block (if any) and a blank line per tool."""
    parts: list[str] = []
    for number, (tool_id, traits, overrides) in enumerate(entries, start=1):
        parts.append(f"[{number}] {tool_id}\n")
        parts.append(render_scope(traits or {}, overrides))
        parts.append("\n")
    return "".join(parts)
