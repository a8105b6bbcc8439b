"""The shared words: one table of round kinds, and every reader spelling them from it."""

from __future__ import annotations

from core.vocabulary import (
    COUNT_KEYS,
    EVENT_TYPES,
    KIND_COUNTERS,
    KINDS,
    OUTCOME_FILTERS,
    PREDICTED_KINDS,
    ROUND_KINDS,
)
from kdcube.bridge.domain.mapping import EXACT


def test_each_kind_has_its_own_name_counter_event_and_chip() -> None:
    for field in ("name", "counter", "event_type", "chip", "tally"):
        values = [getattr(kind, field) for kind in ROUND_KINDS]
        assert len(set(values)) == len(values), field


def test_every_kind_is_marked_by_a_protocol_event() -> None:
    assert {kind.event_type for kind in ROUND_KINDS} <= set(EVENT_TYPES)


def test_counts_are_actions_then_one_counter_per_kind() -> None:
    assert ("actions", *KIND_COUNTERS) == COUNT_KEYS
    assert KIND_COUNTERS == ("rejections", "early_starts", "dedups", "timeouts")


def test_predicted_kinds_are_kinds() -> None:
    assert set(PREDICTED_KINDS) < set(KINDS)


def test_outcome_filter_words_end_with_in_progress() -> None:
    assert OUTCOME_FILTERS == ("ok", "retried", "failed", "in_progress")


def test_the_bridge_emits_only_protocol_event_types() -> None:
    assert {event_type for event_type, _ in EXACT.values()} <= set(EVENT_TYPES)
