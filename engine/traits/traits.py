"""Trait values as the runtime reads them (DESIGN §2.1) and their ordered compatibility (§2.2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from core.vocabulary import (
    EARLY_PROFILE,
    EXECUTION,
    EXPLOITATION,
    EXPLORATION,
    NEUTRAL,
    STRATEGY,
    STRATEGY_VALUES,
    UNKNOWN,
)

# Ordered compatibility: (earlier accepted, following candidate) pairs that may share a round.
_COMPATIBLE: Final = frozenset(
    {
        (EXPLORATION, EXPLORATION),
        (EXPLORATION, NEUTRAL),
        (EXPLOITATION, EXPLORATION),
        (EXPLOITATION, EXPLOITATION),
        (EXPLOITATION, NEUTRAL),
        (NEUTRAL, EXPLORATION),
        (NEUTRAL, EXPLOITATION),
        (NEUTRAL, NEUTRAL),
    }
)


def strategy_items(raw: Any) -> list[Any]:
    """The items the runtime iterates over: a list as-is, anything else as one item."""
    if isinstance(raw, list | tuple):
        return list(raw)
    return [raw]


def normalize_strategy_item(item: Any) -> str | None:
    """The value an item becomes, or ``None`` when the runtime drops it silently."""
    if not isinstance(item, str):
        return None
    value = item.strip().lower()
    return value if value in STRATEGY_VALUES else None


def normalize_strategy(raw: Any) -> tuple[str, ...]:
    """Normalize a raw ``strategy`` value exactly as the runtime does.

    Lower-case and strip each item, drop duplicates and unknown words, drop ``unknown`` when a
    concrete value remains, and yield ``("unknown",)`` when nothing is left. ``None`` (absent)
    is unknown too. Input order is kept.
    """
    # A policy repeats a handful of strategies over thousands of tools, and validation asks
    # about each several times: remember them by their items. Items that are equal give the same
    # answer (text is text; anything else is dropped), so equal keys never disagree.
    key: Any = ("[]", *raw) if isinstance(raw, list | tuple) else raw
    try:
        known = _NORMALIZED.get(key)
    except TypeError:  # an unhashable item (a mapping in the list): not remembered
        return _normalize_strategy(raw)
    if known is None:
        if len(_NORMALIZED) >= 4096:
            _NORMALIZED.clear()
        known = _NORMALIZED[key] = _normalize_strategy(raw)
    return known


_NORMALIZED: dict[Any, tuple[str, ...]] = {}


def _normalize_strategy(raw: Any) -> tuple[str, ...]:
    values: list[str] = []
    if raw is not None:
        for item in strategy_items(raw):
            value = normalize_strategy_item(item)
            if value is not None and value not in values:
                values.append(value)
    concrete = [v for v in values if v != UNKNOWN]
    if concrete:
        return tuple(concrete)
    return (UNKNOWN,)


def is_exactly_neutral(strategy: Iterable[str]) -> bool:
    return set(strategy) == {NEUTRAL}


def compatible(earlier: Iterable[str], following: Iterable[str]) -> bool:
    """Whether ``following`` may come after ``earlier`` in one round: any allowed pair wins."""
    following_values = tuple(following)
    return any((e, f) in _COMPATIBLE for e in earlier for f in following_values)


_COMPATIBLE_TUPLES: dict[tuple[tuple[str, ...], tuple[str, ...]], bool] = {}


def compatible_strategies(earlier: tuple[str, ...], following: tuple[str, ...]) -> bool:
    """:func:`compatible` for normalized strategy tuples, each pair answered once (a handful of
    pairs recur in every round)."""
    key = (earlier, following)
    found = _COMPATIBLE_TUPLES.get(key)
    if found is None:
        found = compatible(earlier, following)
        if len(_COMPATIBLE_TUPLES) < 4096:
            _COMPATIBLE_TUPLES[key] = found
    return found


def normalize_execution(raw: Any) -> dict[str, Any] | None:
    """The execution mapping as the runtime keeps it (string values lower-cased and stripped,
    extra fields kept), or ``None`` when it is not a mapping at all."""
    if not isinstance(raw, Mapping):
        return None
    return {
        key: value.strip().lower() if isinstance(value, str) else value
        for key, value in raw.items()
    }


def is_early_profile(raw_execution: Any) -> bool:
    """Whether a raw ``execution`` value is the complete early-execution profile."""
    execution = normalize_execution(raw_execution)
    if execution is None:
        return False
    return all(execution.get(key) == value for key, value in EARLY_PROFILE.items())


def is_early(traits: Mapping[str, Any] | None) -> bool:
    """Whether a resolved trait mapping makes a call start while the model is still generating:
    its strategy is exactly neutral and its ``execution`` is the complete early profile. The one
    place this rule lives; views, the simulator and the dry-run ask it."""
    if traits is None:
        return False
    # The profile first: most tools have none, and it is the cheaper question.
    return is_early_profile(traits.get(EXECUTION)) and is_exactly_neutral(resolved_strategy(traits))


def early_profile_problems(raw_execution: Any) -> list[str]:
    """Plain-words reasons why an execution value is not the early profile (empty when it is)."""
    if not isinstance(raw_execution, Mapping):
        return [f"execution is {type(raw_execution).__name__}, not a mapping"]
    execution = normalize_execution(raw_execution) or {}
    problems = []
    for key, expected in EARLY_PROFILE.items():
        if key not in execution:
            problems.append(f"{key} is missing (needs {expected})")
        elif execution[key] != expected:
            problems.append(f"{key} is {execution[key]!r} (needs {expected})")
    return problems


def normalize_traits(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A trait mapping as the runtime reads it: ``strategy`` normalized (when present),
    ``execution`` normalized (when a mapping), every other key kept as-is, in mapping order."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key == STRATEGY:
            out[key] = list(normalize_strategy(value))
        elif key == EXECUTION:
            execution = normalize_execution(value)
            out[key] = execution if execution is not None else value
        else:
            out[key] = value
    return out


def resolved_strategy(traits: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The strategy of a resolved trait mapping; a tool with no traits or no strategy is unknown."""
    if traits is None or STRATEGY not in traits:
        return (UNKNOWN,)
    return normalize_strategy(traits[STRATEGY])
