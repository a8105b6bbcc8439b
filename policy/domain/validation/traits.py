"""Checks of one trait mapping's values: ``strategy`` and ``execution`` (DESIGN §2.1, §2.9).

Used for config entries, per-namespace overrides and the manifest's surviving values alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.vocabulary import CONCRETE_STRATEGIES, EARLY_PROFILE, STRATEGY_VALUES, UNKNOWN
from engine.document.paths import Path
from engine.traits.traits import (
    early_profile_problems,
    normalize_strategy,
    normalize_strategy_item,
    strategy_items,
)
from policy.domain.validation.report import Reporter, close_match, describe, listing

EARLY_PROFILE_TEXT = ", ".join(f"{key}: {value}" for key, value in EARLY_PROFILE.items())


def check_trait_entry(reporter: Reporter, entry: Any, path: Path, tool: str) -> None:
    """One ``tool_traits`` value: a mapping whose strategy and execution the runtime can read."""
    if not isinstance(entry, Mapping):
        reporter.error(
            "shape",
            path,
            f"The traits of {tool} must be a mapping (strategy, execution), not "
            f"{describe(entry)}; the runtime ignores this entry.",
            "Write the traits as a mapping, e.g. {strategy: [exploration]}.",
        )
        return
    if "strategy" in entry:
        check_strategy(reporter, entry["strategy"], (*path, "strategy"), tool)
    if "execution" in entry:
        check_execution(reporter, entry["execution"], (*path, "execution"), tool)


def is_empty_strategy(raw: Any) -> bool:
    return raw is None or raw == [] or (isinstance(raw, str) and not raw.strip())


def check_strategy(reporter: Reporter, raw: Any, path: Path, tool: str) -> None:
    """``strategy-empty`` for ``[]``/null/""; ``strategy-value`` at each item the runtime drops."""
    if not is_empty_strategy(raw) and all(
        normalize_strategy_item(item) is not None for item in strategy_items(raw)
    ):
        return  # the common case, checked before the words only a finding needs
    becomes = listing(normalize_strategy(raw))
    alone = " and runs alone" if normalize_strategy(raw) == (UNKNOWN,) else ""
    if is_empty_strategy(raw):
        reporter.error(
            "strategy-empty",
            path,
            f"The strategy of {tool} is {describe(raw)}: this overrides any strategy from the "
            f"code or manifest, and the tool resolves to [unknown]{alone}.",
            "Give a value (exploration, exploitation or neutral), or remove the strategy key "
            "to keep the discovered one.",
        )
        return
    is_list = isinstance(raw, list | tuple)
    for index, item in enumerate(strategy_items(raw)):
        if normalize_strategy_item(item) is not None:
            continue
        suggestion = close_match(
            item.strip().lower() if isinstance(item, str) else None, CONCRETE_STRATEGIES
        )
        reporter.error(
            "strategy-value",
            (*path, index) if is_list else path,
            f"{_capitalized(describe(item))} is not a strategy value "
            f"({', '.join(STRATEGY_VALUES)}): the runtime drops it silently, so the strategy "
            f"of {tool} becomes {becomes}{alone}.",
            f"Did you mean {suggestion}?"
            if suggestion
            else "Use exploration, exploitation or neutral.",
        )


def check_execution(reporter: Reporter, raw: Any, path: Path, tool: str) -> None:
    """``shape`` for a non-mapping execution, ``execution-incomplete`` for a partial profile."""
    if not isinstance(raw, Mapping):
        reporter.error(
            "shape",
            path,
            f"execution of {tool} must be a mapping (trigger, concurrency, result_dependency, "
            f"replay), not {describe(raw)}; the runtime silently treats it as "
            "'no early execution'.",
            f"Write the full early profile ({EARLY_PROFILE_TEXT}) or remove execution.",
        )
        return
    problems = early_profile_problems(raw)
    if problems:
        # A warning, as execution-inert: one outcome (the runtime runs the tool, only never
        # early), one severity (issue 38 item 2).
        reporter.warning(
            "execution-incomplete",
            path,
            f"execution of {tool} is not the complete early profile, so the tool never starts "
            f"early: {'; '.join(problems)}. (Under v2, KDCube's default react agent, no tool "
            "starts early at all.)",
            f"Set all four fields ({EARLY_PROFILE_TEXT}), or remove execution to keep the "
            "ordinary post-generation path.",
            at="key",
        )


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]
