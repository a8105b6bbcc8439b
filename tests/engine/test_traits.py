from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.vocabulary import EARLY_PROFILE, STRATEGY_VALUES
from engine.traits.traits import (
    compatible,
    is_early_profile,
    is_exactly_neutral,
    normalize_execution,
    normalize_strategy,
    normalize_traits,
    resolved_strategy,
)

# DESIGN §2.2, row = accepted earlier, column = following candidate.
MATRIX = {
    "exploration": {"exploration": 1, "exploitation": 0, "neutral": 1, "unknown": 0},
    "exploitation": {"exploration": 1, "exploitation": 1, "neutral": 1, "unknown": 0},
    "neutral": {"exploration": 1, "exploitation": 1, "neutral": 1, "unknown": 0},
    "unknown": {"exploration": 0, "exploitation": 0, "neutral": 0, "unknown": 0},
}


@pytest.mark.parametrize(
    ("earlier", "following", "expected"),
    [
        (earlier, following, bool(allowed))
        for earlier, row in MATRIX.items()
        for following, allowed in row.items()
    ],
)
def test_it_follows_the_ordered_compatibility_matrix(
    earlier: str, following: str, expected: bool
) -> None:
    assert compatible((earlier,), (following,)) is expected


def test_it_rejects_exploitation_after_exploration_but_not_the_reverse() -> None:
    assert not compatible(("exploration",), ("exploitation",))
    assert compatible(("exploitation",), ("exploration",))


@pytest.mark.parametrize(
    ("earlier", "following", "expected"),
    [
        # exploration → exploitation alone is "no", but exploration → exploration is "yes".
        (("exploration",), ("exploration", "exploitation"), True),
        # neither exploration → exploitation nor anything → unknown is allowed.
        (("exploration",), ("exploitation",), False),
        (("exploration", "exploitation"), ("exploitation",), True),
        (("exploration", "neutral"), ("exploitation",), True),
        (("exploration",), ("unknown",), False),
        (("unknown",), ("neutral", "exploration"), False),
        (("exploration", "exploitation"), ("unknown",), False),
    ],
)
def test_it_accepts_mixed_sets_when_any_pair_is_allowed(
    earlier: tuple[str, ...], following: tuple[str, ...], expected: bool
) -> None:
    assert compatible(earlier, following) is expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([], ("unknown",)),
        ("bogus", ("unknown",)),
        (5, ("unknown",)),
        (None, ("unknown",)),
        (" Exploration ", ("exploration",)),
        (["NEUTRAL", "neutral", " neutral"], ("neutral",)),
        (["unknown", "exploitation"], ("exploitation",)),
        (["unknown", "bogus"], ("unknown",)),
        ([{"kind": "exploration"}, "neutral"], ("neutral",)),
        ([{"kind": "exploration"}], ("unknown",)),
        (["exploitation", "exploration"], ("exploitation", "exploration")),
    ],
)
def test_it_normalizes_strategy_like_the_runtime(raw: Any, expected: tuple[str, ...]) -> None:
    assert normalize_strategy(raw) == expected


_items = st.one_of(
    st.sampled_from([*STRATEGY_VALUES, " Neutral ", "EXPLORATION", "bogus", ""]),
    st.text(max_size=12),
    st.integers(),
    st.none(),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)


@given(st.one_of(_items, st.lists(_items, max_size=8)))
def test_it_always_yields_known_values_without_duplicates(raw: Any) -> None:
    result = normalize_strategy(raw)
    assert result
    assert set(result) <= set(STRATEGY_VALUES)
    assert len(set(result)) == len(result)
    # unknown never sits beside a concrete value.
    assert result == ("unknown",) or "unknown" not in result


def test_it_treats_only_the_pure_neutral_set_as_exactly_neutral() -> None:
    assert is_exactly_neutral(("neutral",))
    assert not is_exactly_neutral(("neutral", "exploration"))
    assert not is_exactly_neutral(("unknown",))


def test_it_reads_a_missing_strategy_as_unknown() -> None:
    assert resolved_strategy(None) == ("unknown",)
    assert resolved_strategy({"execution": dict(EARLY_PROFILE)}) == ("unknown",)
    assert resolved_strategy({"strategy": "Neutral"}) == ("neutral",)


def test_it_matches_the_early_profile_after_lower_casing_and_keeps_extra_fields() -> None:
    raw = {key: f" {value.upper()} " for key, value in EARLY_PROFILE.items()} | {"queue": "Q"}
    assert is_early_profile(raw)
    assert normalize_execution(raw) == dict(EARLY_PROFILE) | {"queue": "q"}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        True,
        "tool_call_complete",
        {k: v for k, v in EARLY_PROFILE.items() if k != "replay"},
        dict(EARLY_PROFILE) | {"concurrency": "after_generation"},
    ],
)
def test_it_refuses_early_execution_for_anything_but_the_complete_profile(raw: Any) -> None:
    assert not is_early_profile(raw)


def test_it_normalizes_traits_and_keeps_other_keys_in_order() -> None:
    raw = {"note": "Keep Me", "strategy": "Neutral", "execution": {"trigger": " X "}}
    assert list(normalize_traits(raw).items()) == [
        ("note", "Keep Me"),
        ("strategy", ["neutral"]),
        ("execution", {"trigger": "x"}),
    ]
