"""Checks of the keys inside one connection: named-service namespaces and operations,
``tool_traits`` targets (and per-namespace overrides), and ``tool_execution`` entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.document.paths import Path
from engine.tools.connections import (
    CALLABLE_OPERATIONS,
    MCP,
    NAMED_SERVICE,
    NAMESPACE_LIST_KEYS,
    NOT_OFFERED_CALLABLES,
    OPERATION_CALLABLES,
    PYTHON,
    WILDCARD,
    Connection,
    design_key_target,
    is_mcp_wildcard,
    mcp_tool_of,
    qualify_mcp_key,
)
from engine.tools.loading import trait_tool_id
from engine.traits.execution_design import parse_design
from engine.traits.traits import normalize_strategy
from policy.domain.validation.report import (
    Reporter,
    close_match,
    describe,
    listing,
    shape_list,
    shape_mapping,
)
from policy.domain.validation.traits import check_trait_entry


def check_namespaces(reporter: Reporter, connection: Connection) -> None:
    raw, path = connection.raw, connection.path
    if not shape_mapping(reporter, raw, path, "namespaces"):
        return
    for name, block in raw["namespaces"].items():
        ns_path = (*path, "namespaces", name)
        if not isinstance(block, Mapping):
            reporter.error(
                "shape",
                ns_path,
                f"Namespace {name!r} must be a mapping with an allowed list, not "
                f"{describe(block)}; the runtime ignores it.",
                "Write it as {allowed: [object.search, ...]}.",
            )
            continue
        for key in NAMESPACE_LIST_KEYS:
            shape_list(reporter, block, ns_path, key)
    for namespace in connection.namespaces:
        for position, operation in enumerate(namespace.operations):
            if isinstance(operation, str):
                item_path = (*namespace.path, namespace.list_key, position)
                _check_operation(reporter, operation, item_path, namespace.name)
        block = raw["namespaces"][namespace.name]
        if shape_mapping(reporter, block, namespace.path, "tool_traits") and connection.loadable:
            _check_overrides(reporter, connection, namespace.name, block["tool_traits"])


def _check_operation(reporter: Reporter, operation: str, path: Path, namespace: str) -> None:
    if operation == "provider.capabilities":
        reporter.info(
            "capabilities-not-offered",
            path,
            "provider.capabilities is mapped to provider_capabilities, but the runtime never "
            "offers that callable to the model: allowing it has no effect.",
            "Remove provider.capabilities, or keep it knowing it is not a tool.",
        )
        return
    if operation in OPERATION_CALLABLES:
        return
    if operation == WILDCARD:
        message = (
            f'"*" is not a wildcard for named services: the runtime ignores it, so namespace '
            f"{namespace!r} gains no operation from it."
        )
        hint = "List each operation: " + ", ".join(OPERATION_CALLABLES) + "."
    else:
        suggestion = close_match(operation, OPERATION_CALLABLES)
        if operation in CALLABLE_OPERATIONS:
            suggestion = CALLABLE_OPERATIONS[operation]
        message = (
            f"{operation!r} is not an operation the runtime maps to a callable: it is ignored "
            f"and namespace {namespace!r} offers no tool for it."
        )
        hint = (
            f"Did you mean {suggestion}?"
            if suggestion
            else "Use one of: " + ", ".join(OPERATION_CALLABLES) + "."
        )
    reporter.error("operation-unknown", path, message, hint)


def _check_overrides(
    reporter: Reporter, connection: Connection, namespace: str, overrides: Mapping[Any, Any]
) -> None:
    allowed = next(n.callables for n in connection.namespaces if n.name == namespace)
    base = (*connection.path, "namespaces", namespace, "tool_traits")
    for key, entry in overrides.items():
        tool = connection.tool_id(key) if isinstance(key, str) else repr(key)
        if key not in allowed:
            why = f"namespace {namespace!r} does not offer {key!r}"
            _target_unknown(reporter, connection, key, (*base, key), why, allowed)
        check_trait_entry(reporter, entry, (*base, key), f"{tool} in namespace {namespace!r}")


def check_trait_keys(
    reporter: Reporter,
    connection: Connection,
    reached: frozenset[str] = frozenset(),
    *,
    tools_unknown: bool = False,
) -> None:
    """``reached``: every trait-table key a tool of the agent reads (its id, ``<alias>.*``, …).
    ``tools_unknown``: the connection offers tools Traitdeck has not seen, so a key that matches
    none it knows may still match one (``tools-unknown`` says so; no error)."""
    raw, path = connection.raw, connection.path
    if not shape_mapping(reporter, raw, path, "tool_traits"):
        return
    callables = connection.callables()
    offered = frozenset(callables)  # looked up once per key: 10k keys must not scan 10k tools
    alias = connection.alias or ""
    seen: dict[str, Any] = {}
    for key, entry in raw["tool_traits"].items():
        entry_path = (*path, "tool_traits", key)
        target = _trait_target(connection, key, reached, offered)
        if target is None and not tools_unknown:
            _target_unknown(reporter, connection, key, entry_path, None, callables)
        if connection.kind == MCP and isinstance(key, str):
            qualified = qualify_mcp_key(key, alias)
            if qualified in seen:
                reporter.warning(
                    "trait-key-duplicate",
                    entry_path,
                    f"{key!r} and {seen[qualified]!r} both name {qualified} once the runtime "
                    "qualifies them: this entry replaces the earlier one whole.",
                    "Keep one entry per tool.",
                    at="key",
                )
            seen[qualified] = key
        name = target if target and target != WILDCARD else None
        label = connection.tool_id(name) if name else f"the {key!r} entry"
        check_trait_entry(reporter, entry, entry_path, label)
    if connection.kind == MCP:
        _check_wildcard_mixed(reporter, connection)


def _trait_target(
    connection: Connection, key: Any, reached: frozenset[str], offered: frozenset[str]
) -> str | None:
    """What a ``tool_traits`` key applies to: ``*`` for a wildcard that reaches some tool, the
    tool id it names when some tool of the agent reads it (dotted keys reach other connections'
    tools, as in the runtime), or None. ``offered``: the connection's callables."""
    alias = connection.alias or ""
    qualified = trait_tool_id(alias, key, MCP if connection.kind == MCP else PYTHON)
    if not qualified or qualified not in reached:
        return None
    if is_mcp_wildcard(qualified, alias):
        return WILDCARD
    name = mcp_tool_of(qualified, alias) if connection.kind == MCP else None
    if name is not None:
        return name
    return key if isinstance(key, str) and key.strip() in offered else qualified


def _target_unknown(
    reporter: Reporter,
    connection: Connection,
    key: Any,
    path: Path,
    why: str | None,
    callables: Any,
) -> None:
    alias = connection.alias or ""
    hint = "Use the callable name the connection offers"
    if isinstance(key, str) and key in OPERATION_CALLABLES and connection.kind == NAMED_SERVICE:
        callable_name = OPERATION_CALLABLES[key]
        why = why or f"{key} is a provider operation id; traits are keyed by callable names"
        hint = f"Use {callable_name} (the callable for {key})"
    elif key == WILDCARD:
        why = why or f'"*" applies to every tool of {alias}, and Traitdeck knows none'
        hint = "List the tools under allowed, or upload the manifest"
    elif isinstance(key, str) and key in CALLABLE_OPERATIONS and connection.kind == NAMED_SERVICE:
        operation = CALLABLE_OPERATIONS[key]
        if key in NOT_OFFERED_CALLABLES:
            why = why or f"{key} is never offered to the model"
            hint = "Remove this entry"
        else:
            why = why or f"no namespace allows {operation}"
            hint = f"Add {operation} to a namespace's allowed list, or remove this entry"
    elif connection.kind == MCP and isinstance(key, str):
        qualified = qualify_mcp_key(key, alias)
        why = why or f"it names {qualified}, and no tool of this agent has that id"
        suggestion = close_match(mcp_tool_of(qualified, alias) or key, callables)
        if key in callables:
            # A dotted tool name reads as "<alias>.<tool>": only the full id reaches it.
            hint = f"Write the key as mcp.{alias}.{key}"
        elif suggestion:
            hint = f"Did you mean {suggestion}?"
    else:
        name = key.rsplit(".", 1)[-1] if isinstance(key, str) else key
        suggestion = name if name in callables else close_match(name, callables)
        full = trait_tool_id(alias, key, PYTHON) if isinstance(key, str) else key
        why = why or f"it names {full}, and no tool of this agent has that id"
        if suggestion:
            hint = f"Did you mean {suggestion}?"
    if not hint.endswith("?"):
        hint += "."
    offered = listing(callables) if callables else "none"
    reporter.error(
        "trait-target-unknown",
        path,
        f"tool_traits key {key!r} matches no tool of {alias} ({why}): these traits reach no tool "
        f"Traitdeck knows (it knows a connection's tools from allowed and the manifest). "
        f"Offered: {offered}.",
        hint,
        at="key",
    )


def _check_wildcard_mixed(reporter: Reporter, connection: Connection) -> None:
    alias = connection.alias or ""
    traits = connection.traits_raw()
    wildcards = [
        key
        for key in traits
        if isinstance(key, str) and is_mcp_wildcard(qualify_mcp_key(key, alias), alias)
    ]
    if not wildcards:
        return
    strategies: dict[tuple[str, ...], str] = {}
    for key, entry in traits.items():
        if key in wildcards or not isinstance(entry, Mapping) or "strategy" not in entry:
            continue
        strategies.setdefault(tuple(sorted(normalize_strategy(entry["strategy"]))), str(key))
    if len(strategies) < 2:
        return
    shown = "; ".join(f"{key}: {listing(s)}" for s, key in strategies.items())
    reporter.warning(
        "wildcard-mixed",
        (*connection.path, "tool_traits", wildcards[0]),
        f"{wildcards[0]!r} applies one trait mapping to every tool of {alias}, but its concrete "
        f"entries differ in strategy ({shown}): the server mixes reads and writes.",
        "Give each tool a concrete entry and drop the wildcard, or keep only keys that are "
        "truly the same for every tool in it.",
        at="key",
    )


def check_design_entries(reporter: Reporter, connection: Connection) -> None:
    raw, path = connection.raw, connection.path
    if not shape_mapping(reporter, raw, path, "tool_execution"):
        return
    callables = connection.callables()
    for key, entry in raw["tool_execution"].items():
        entry_path = (*path, "tool_execution", key)
        target = design_key_target(connection, key)
        if target is None or target not in callables:
            suggestion = close_match(key, callables)
            if isinstance(key, str) and key in OPERATION_CALLABLES:
                suggestion = OPERATION_CALLABLES[key]
            reporter.error(
                "execution-target-unknown",
                entry_path,
                f"tool_execution key {key!r} names no tool of {connection.alias}; this execution "
                f"design applies to nothing. Offered: {listing(callables) or 'none'}.",
                f"Did you mean {suggestion}?"
                if suggestion
                else "Key tool_execution by the callable name.",
                at="key",
            )
        if not isinstance(entry, Mapping):
            reporter.error(
                "shape",
                entry_path,
                f"An execution design must be a mapping (timeout_s, mode, retry, …), not "
                f"{describe(entry)}.",
                "Write it as {timeout_s: 20, mode: sync, retry: idempotency_key}.",
            )
            continue
        for problem in parse_design(entry)[1]:
            reporter.error(
                "execution-design-value",
                (*entry_path, problem.field),
                problem.message,
                problem.hint,
            )
