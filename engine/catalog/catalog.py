"""The catalog preview: the Scope block the runtime writes into the model's tool catalog (§2.7),
and the compact form (``tool_catalog_detail: compact``, issue 37 §2) that has none.

The text must match the runtime byte for byte, so the admin reads exactly what the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from engine.catalog.multi_action import CATALOG_DETAILS, applied_profile, catalog_form
from engine.tools.loading import runtime_traits

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


#: The compact form's fixed lines (``layout.build_compact_tools_block``): the header gets this
#: suffix, then the roster line, then this rule.
COMPACT_SUFFIX: Final = " [COMPACT]"
COMPACT_RULE: Final = (
    "Only these tool ids are callable. Parameter names, types, and descriptions below are exact."
)
#: The header the preview draws its one block under (the runtime splits the list into react,
#: common and code-only blocks, each in this layout under its own header).
PREVIEW_HEADER: Final = "[AVAILABLE TOOLS]"


#: The connection kinds whose tools the runtime runs as coroutines (its MCP adapter and
#: named-service module): `` [async]`` after the id in the compact form. A python tool is async
#: when its function is a coroutine, which only its code says (shown without).
ASYNC_KINDS: Final = frozenset({"mcp", "named_service"})


class CompactTool(Protocol):
    """What the compact form needs of a tool (``resolution.EffectiveTool`` has it)."""

    @property
    def tool_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def namespaces_applicable(self) -> tuple[str, ...]: ...


def render_compact(tools: Sequence[CompactTool], *, header: str = PREVIEW_HEADER) -> str:
    """The compact catalog (``tool_catalog_detail: compact``) of ``tools`` (pass
    ``resolution.listing``) as the runtime renders it, without the lines it takes from each tool's
    code (``purpose``, ``params`` and ``constraint``, :data:`COMPACT_OMITS`): the header, the
    roster of ids, the rule, then per tool ``- <id>`` (`` [async]`` for :data:`ASYNC_KINDS`) and
    its ``namespaces`` line. No Scope block, no trait line. ``""`` when there is no tool (the
    runtime renders nothing either)."""
    ids = [str(tool.tool_id or "unknown") for tool in tools]
    if not ids:
        return ""
    lines = [
        f"{header}{COMPACT_SUFFIX}",
        f"This catalog: {len(ids)} tools - {', '.join(ids)}.",
        COMPACT_RULE,
    ]
    for tool_id, tool in zip(ids, tools, strict=True):
        lines.append(f"- {tool_id}{' [async]' if tool.kind in ASYNC_KINDS else ''}")
        if tool.namespaces_applicable:
            lines.append("  namespaces: " + ", ".join(map(str, tool.namespaces_applicable)))
    return "\n".join(lines)


#: What the preview says of the lines it leaves out of the compact form.
COMPACT_OMITS: Final = (
    "The runtime also prints, under each tool, a purpose line, its params and its first "
    "constraint, taken from the tool's code (the built-ins', a python module's docstrings, an MCP "
    "server's schema, the named-service module), and marks a python tool [async] when its "
    "function is a coroutine; Traitdeck does not read that code, so those lines and marks are not "
    "shown. Everything else is the runtime's text byte for byte."
)


class EffectiveToolLike(ScopedTool, CompactTool, Protocol):
    """A tool both forms can render (``resolution.EffectiveTool``)."""


@dataclass(frozen=True)
class CatalogPreview:
    """The catalog the model of an agent reads, in one of the runtime's two forms.

    ``detail`` is the form rendered (the one asked for, else the one that applies by default);
    ``default_detail`` and ``default_source`` say which form applies when the end user picks none
    and where that comes from (a profile's or a react block's key path, or the runtime's default);
    ``include`` is ``False`` when the runtime writes no catalog at all (``include_source`` says
    where that is set), the text then being what the model would read with it on."""

    detail: str
    text: str
    default_detail: str
    default_source: str
    include: bool
    include_source: str
    #: The instruction profile that applies by default (its id), or ``None``.
    profile: str | None = None

    def document(self, extra: str = "") -> str:
        """The text as a file: the compact form (which the runtime ends without a line end)
        gets one, and ``extra`` (Traitdeck's own lines, e.g. tools it has not seen) follows, after a
        blank line in the compact form."""
        if self.detail == "full":
            return self.text + extra
        body = f"{self.text}\n" if self.text else ""
        return body + ("\n" if body and extra else "") + extra

    def as_json(self) -> dict[str, Any]:
        return {
            "detail": self.detail,
            "text": self.text,
            "default_detail": self.default_detail,
            "default_detail_source": self.default_source,
            "include_tool_catalog": self.include,
            "include_tool_catalog_source": self.include_source,
            "instruction_profile": self.profile,
            **({"omitted": COMPACT_OMITS} if self.detail == "compact" else {}),
        }


def catalog_preview(
    data: Any, agent: str, tools: Sequence[EffectiveToolLike], *, detail: str | None = None
) -> CatalogPreview:
    """The preview of ``tools`` (pass ``resolution.listing``) in ``detail`` (``full``,
    ``compact``, or ``None`` for the form that applies by default: :func:`catalog_form` with no
    pick of the end user's)."""
    form = catalog_form(data, agent)
    shown = detail if detail in CATALOG_DETAILS else form.detail
    text = render_compact(tools) if shown == "compact" else render_catalog(catalog_entries(tools))
    profile = applied_profile(data, agent)
    return CatalogPreview(
        shown,
        text,
        form.detail,
        form.detail_source,
        form.include,
        form.include_source,
        None if profile is None else profile.id,
    )
