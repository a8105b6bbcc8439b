"""Checks of each resolved tool: its effective traits and its execution design (DESIGN §2.9).

These run on what the runtime will actually use (all layers merged), so they apply to tools fed
by the manifest too. Built-in ``react.*`` tools are fixed by the runtime and not checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.vocabulary import EXPLOITATION, UNKNOWN
from engine.document.diagnostics import Severity
from engine.document.paths import AGENTS, Path
from engine.tools.loading import runtime_traits
from engine.tools.resolution import MANIFEST_ROOT, AgentResolution, EffectiveTool
from engine.traits.execution_design import SYNC_LIMIT_S, TOOL_REFERENCE_FIELDS, parse_design
from engine.traits.traits import (
    is_early_profile,
    is_exactly_neutral,
    normalize_strategy,
    normalize_strategy_item,
    strategy_items,
)
from policy.domain.validation.report import At, Reporter, listing
from policy.domain.validation.traits import check_execution, check_strategy


def check_tools(reporter: Reporter, resolution: AgentResolution) -> None:
    # Each connection's callables as a set, once: every tool of the connection looks them up.
    callables = {c.index: frozenset(c.callables()) for c in resolution.connections}
    known_ids = {tool.tool_id for tool in resolution.tools}
    for tool in resolution.tools:
        if tool.builtin:
            continue
        _check_manifest_values(reporter, tool)
        _check_strategy_unknown(reporter, tool)
        _check_inert(reporter, tool, tool.traits, tool.trait_paths.get("execution"))
        for namespace, override in tool.namespace_overrides.items():
            path = tool.namespace_override_paths[namespace]
            _check_inert(reporter, tool, override, path, namespace=namespace)
        _check_override_drops_execution(reporter, tool)
        _check_wildcard_overrides(reporter, tool)
        _check_untypeable(reporter, tool)
        if tool.connection_index is None or tool.connection_index not in callables:
            continue
        _check_design(reporter, tool, callables[tool.connection_index], known_ids)


#: A place to point at: a path, and whether the diagnostic is about the key there.
Place = tuple[Path, bool]


def _report(
    reporter: Reporter,
    severity: Severity,
    code: str,
    tool: EffectiveTool,
    place: Place | None,
    message: str,
    hint: str,
) -> None:
    """Report at ``place``, or, without one, at the node that brought the tool in."""
    if place is None:
        path = tool.origin or ()
        # A tool that no list item names came from the whole connection: point at its first key.
        whole_connection = len(path) == len(AGENTS) + 3
        at: At = "key" if tool.origin_is_key else "first_key" if whole_connection else "value"
    else:
        path, at = place[0], "key" if place[1] else "value"
    reporter.report(severity, code, path, message, hint, at=at)


def _from_config(tool: EffectiveTool, key: str) -> Path | None:
    path = tool.trait_paths.get(key)
    if path is None or not path or path[0] == MANIFEST_ROOT:
        return None
    return path


def _check_manifest_values(reporter: Reporter, tool: EffectiveTool) -> None:
    """A discovered value that survives the config layer is read by the runtime: check it too."""
    for key, check in (("strategy", check_strategy), ("execution", check_execution)):
        path = tool.trait_paths.get(key)
        if path and path[0] == MANIFEST_ROOT and key in tool.traits:
            check(reporter, tool.traits[key], (*path, key), tool.tool_id)


def _check_strategy_unknown(reporter: Reporter, tool: EffectiveTool) -> None:
    if tool.strategy != (UNKNOWN,):
        return
    raw = tool.traits.get("strategy")
    explicit = "strategy" in tool.traits and any(
        normalize_strategy_item(item) == UNKNOWN for item in strategy_items(raw)
    )
    if "strategy" in tool.traits and not explicit:
        return  # an invalid or empty strategy already has its own error
    message = (
        f"{tool.tool_id} has no strategy, so it resolves to [unknown] and always runs alone: "
        "the overseer rejects any other action beside it in the same round."
    )
    hint = (
        f"Add a strategy under tool_traits.{tool.callable}: [exploration] if it reads, "
        "[exploitation] if it writes, [neutral] if it is detached bookkeeping."
    )
    config_path = _from_config(tool, "strategy")
    if explicit:
        message = (
            f"{tool.tool_id} is declared [unknown], so it always runs alone: the overseer "
            "rejects any other action beside it in the same round."
        )
        if config_path is not None:
            reporter.warning("strategy-unknown", (*config_path, "strategy"), message, hint)
            return
    _report(reporter, Severity.WARNING, "strategy-unknown", tool, None, message, hint)


def _check_inert(
    reporter: Reporter,
    tool: EffectiveTool,
    traits: Mapping[str, Any],
    path: Path | None,
    *,
    namespace: str | None = None,
) -> None:
    if not is_early_profile(traits.get("execution")):
        return
    strategy = normalize_strategy(traits.get("strategy"))
    if is_exactly_neutral(strategy):
        return
    where = f" in namespace {namespace!r}" if namespace is not None else ""
    target = (*path, "execution") if path else tool.origin or ()
    reporter.warning(
        "execution-inert",
        target,
        f"{tool.tool_id}{where} has the complete early profile but its strategy is "
        f"{listing(strategy)}, not exactly [neutral], so it never starts early: it runs after "
        "generation like any other call. (Under v2, KDCube's default react agent, no tool "
        "starts early at all.)",
        "Set strategy: [neutral] if the call is truly detached, or remove execution.",
        at="key",
    )


def _check_override_drops_execution(reporter: Reporter, tool: EffectiveTool) -> None:
    if "execution" not in tool.traits:
        return
    for namespace, override in tool.namespace_overrides.items():
        if "execution" in override:
            continue
        reporter.warning(
            "override-drops-execution",
            tool.namespace_override_paths[namespace],
            f"For calls in namespace {namespace!r} this override replaces the whole trait "
            f"mapping of {tool.tool_id}, so its default execution is lost there (the call "
            "never starts early in that namespace).",
            "Copy the execution mapping into the override if it should still apply.",
            at="key",
        )


def _is_wildcard_key(candidate: str) -> bool:
    return candidate == "*" or candidate.endswith(".*")


def _check_wildcard_overrides(reporter: Reporter, tool: EffectiveTool) -> None:
    """The runtime applies ``*`` entries after the tool's own entry (python, named services and
    MCP alike): the wildcard wins per key."""
    layers = tool.config_layers
    for position, (path, candidate, entry) in enumerate(layers):
        if _is_wildcard_key(candidate):
            continue
        for key, value in entry.items():
            winner = next(
                ((p, c, e) for p, c, e in reversed(layers[position + 1 :]) if key in e), None
            )
            if winner is None or not _is_wildcard_key(winner[1]):
                continue
            mine = runtime_traits({key: value}).get(key)
            theirs = runtime_traits({key: winner[2][key]}).get(key)
            if mine == theirs:
                continue
            reporter.warning(
                "wildcard-overrides",
                (*path, key),
                f"The {winner[0][-1]!r} entry sets {key} to {_show(theirs)} for every tool of "
                f"{tool.alias}, and the runtime applies it after this entry: "
                f"{tool.tool_id} gets {_show(theirs)}, not {_show(mine)}.",
                f"Remove {key} from the {winner[0][-1]!r} entry and give each tool its own, "
                "or make the two values equal.",
                at="key",
            )


#: What a model reliably types in a tool id: letters, digits, ``_``, ``-`` and ``.``.
_TYPEABLE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def untypeable(name: str) -> bool:
    return not _TYPEABLE.match(name)


def _check_untypeable(reporter: Reporter, tool: EffectiveTool) -> None:
    if not untypeable(tool.callable) or untypeable(tool.alias):
        return  # an untypeable alias is reported once, at the alias
    _report(
        reporter,
        Severity.WARNING,
        "alias-untypeable",
        tool,
        None,
        f"Tool id {tool.tool_id!r} has characters a model cannot reliably type (only letters, "
        "digits, _, - and . are safe): the runtime offers it as written, and calls that "
        "misspell it are rejected as unknown tools.",
        "Rename the tool to letters, digits, _, - and . only.",
    )


def _show(value: Any) -> str:
    if isinstance(value, list):
        return listing(value)
    return repr(value)


def _check_design(
    reporter: Reporter, tool: EffectiveTool, callables: frozenset[str], known_ids: set[str]
) -> None:
    """``callables``: those of the tool's connection (a reference may name one of them)."""
    design, _ = parse_design(tool.execution_design)
    raw = tool.execution_design
    entry = tool.design_path

    entry_place: Place | None = (entry, True) if entry is not None else None

    def at_field(name: str) -> Place | None:
        """The field's value when given, else the entry that lacks it."""
        if entry is not None and name in raw:
            return ((*entry, name), False)
        return entry_place

    def warn(code: str, place: Place | None, message: str, hint: str) -> None:
        _report(reporter, Severity.WARNING, code, tool, place, message, hint)

    design_key = f"tool_execution.{tool.callable}"
    if EXPLOITATION in tool.strategy and not design.has_retry_story and not design.gated:
        why = (
            "is marked not_safe to retry but has no confirmation gate"
            if design.retry == "not_safe"
            else "has no retry story and no confirmation gate"
        )
        warn(
            "exploitation-unsafe-retry",
            at_field("retry"),
            f"{tool.tool_id} changes state (exploitation) and {why}: an agent retry may repeat "
            "its effect (a second payment, message or ticket).",
            f"Under {design_key} set retry: natural_key, idempotency_key or dedup, or "
            "confirm: true when it is not safe to retry.",
        )
    if design.effective_mode == "sync" and (design.timeout_s or 0) > SYNC_LIMIT_S:
        unset = " (no mode means sync)" if design.mode is None else ""
        warn(
            "sync-too-long",
            at_field("timeout_s"),
            f"{tool.tool_id} is synchronous{unset} with timeout_s {design.timeout_s:g}, over "
            f"{SYNC_LIMIT_S} s: the call holds the round that long and a timeout wastes it.",
            "Make it mode: async_job returning a job handle, with a status_tool to poll; or "
            f"keep timeout_s at {SYNC_LIMIT_S} or less and name an async_alternative.",
        )
    if design.mode == "async_job" and "status_tool" not in raw:
        warn(
            "async-without-status",
            entry_place,
            f"{tool.tool_id} starts an async job but names no status_tool, so the agent has "
            "no way to poll for the result.",
            f"Add status_tool (e.g. check_job_status) under {design_key}.",
        )
    if tool.early and design.retry in (None, "not_safe"):
        place = at_field("retry")
        execution_path = _from_config(tool, "execution")
        if place is None and execution_path is not None:
            place = ((*execution_path, "execution"), True)
        warn(
            "early-without-idempotency",
            place,
            f"{tool.tool_id} starts early (before the round is complete) but its retry story "
            f"is {design.retry or 'unset'}: the ledger only prevents a repeat within one round.",
            f"Set retry: idempotency_key (or natural_key / dedup) under {design_key} and pass "
            "the provider's idempotency key.",
        )
    if "timeout_s" not in raw:
        _report(
            reporter,
            Severity.INFO,
            "timeout-missing",
            tool,
            entry_place,
            f"{tool.tool_id} has no timeout_s: Traitdeck cannot tell how long a call may hold "
            "the round or when to suggest an async job.",
            f"Set timeout_s under {design_key} to the worst-case time in seconds.",
        )
    for name in TOOL_REFERENCE_FIELDS:
        target = getattr(design, name)
        if target is None or target in known_ids:
            continue
        if target in callables:
            continue
        warn(
            "execution-reference-unknown",
            at_field(name),
            f"{name} of {tool.tool_id} names {target!r}, which is not a tool of this agent.",
            "Name a callable of this connection or a full tool id of the agent.",
        )
