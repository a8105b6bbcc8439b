"""observe.live without a database: how cards word what happened."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.vocabulary import KINDS, ROUND_KINDS
from observe.domain.rounds import Attempt, RoundAction
from observe.live import action_chips, cards, seconds
from tests.observe.live_support import EARLY_ROUND, assembled


@pytest.mark.parametrize(
    ("ms", "digits", "shown"),
    [(1234, 1, "1.2 s"), (30000, 1, "30 s"), (0, 1, "0 s"), (10012, 3, "10.012 s")],
)
def test_seconds_read_naturally(ms: float, digits: int, shown: str) -> None:
    assert seconds(ms, digits=digits) == shown


def test_an_early_start_says_how_long_before_generation_finished() -> None:
    round_ = assembled(*EARLY_ROUND)
    attempt = round_.attempts[0]
    chips = {chip.kind: chip for chip in action_chips(attempt.actions[0], attempt)}
    assert chips["accepted"].label == "accepted"
    assert chips["early"].detail == "1.2 s before generation finished"


def chips_of(*events: tuple[int, str, dict[str, object]]) -> dict[str, tuple[str, str]]:
    attempt = assembled(*events).attempts[0]
    return {
        chip.kind: (chip.detail, chip.hint) for chip in action_chips(attempt.actions[0], attempt)
    }


CALL = {"action_index": 0, "tool_id": "jobs.export", "tool_call_id": "tc_0123456789ab"}


def test_a_dedup_names_the_reused_call_and_how_it_matched() -> None:
    chips = chips_of(
        (
            0,
            "ledger.dedup",
            {**CALL, "original_action_index": 1, "match": "slot", "fingerprint": "a" * 64},
        )
    )
    assert chips["dedup"] == ("reused tc_0123456789ab (matched by slot)", "")


def test_a_timeout_says_after_how_long_the_limit_and_what_to_try() -> None:
    timeout = {**CALL, "limit_ms": 30000, "elapsed_ms": 30015, "async_alternative": "jobs.launch"}
    chips = chips_of((0, "tool.timeout", timeout))
    assert chips["timeout"] == ("after 30.015 s, limit 30 s", "try jobs.launch")
    chips = chips_of((0, "tool.timeout", {**timeout, "async_alternative": None}))
    assert chips["timeout"] == ("after 30.015 s, limit 30 s", "")


def test_a_rejection_gives_the_rule_in_words() -> None:
    chips = chips_of(
        (0, "action.observed", {"action_index": 0, "action": "think", "tool_id": None}),
        (
            1,
            "action.rejected",
            {"action_index": 0, "tool_id": None, "code": "multi_action_bundle_mixed_actions"},
        ),
    )
    detail, _ = chips["rejected"]
    assert "'think' is not a supported action" in detail


def test_an_action_without_a_verdict_yet_says_so_and_errors_show() -> None:
    chips = chips_of((0, "tool.finished", {**CALL, "status": "error", "duration_ms": 5}))
    assert set(chips) == {"pending", "error"}


EVERY_KIND = (
    (0, "action.observed", {"action_index": 0, "action": "call_tool", "tool_id": "jobs.export"}),
    (100, "tool.early_started", {**CALL, "fingerprint": "a" * 64}),
    (
        200,
        "ledger.dedup",
        {**CALL, "original_action_index": 1, "match": "slot", "fingerprint": "a" * 64},
    ),
    (300, "tool.timeout", {**CALL, "limit_ms": 30000, "elapsed_ms": 30015}),
    (400, "action.rejected", {**CALL, "code": "multi_action_bundle_mixed_actions"}),
)


def test_an_action_of_every_kind_shows_their_chips_as_the_kinds_table_words_them() -> None:
    attempt = assembled(*EVERY_KIND).attempts[0]
    chips = action_chips(attempt.actions[0], attempt)
    assert [(chip.kind, chip.label) for chip in chips] == [
        (kind.chip, kind.action_chip) for kind in ROUND_KINDS
    ]


def test_a_kind_added_to_the_table_gets_its_chip_in_the_tables_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def slow(action: RoundAction, attempt: Attempt) -> tuple[str, str] | None:
        return ("over 10 s", "") if (action.duration_ms or 0) > 10_000 else None

    added = replace(KINDS["timeout"], name="slow", chip="slow", action_chip="slow call")
    monkeypatch.setattr(cards, "ROUND_KINDS", (added, *ROUND_KINDS))
    monkeypatch.setitem(cards.KIND_DETAILS, "slow", slow)
    attempt = assembled(*EVERY_KIND).attempts[0]
    chips = action_chips(attempt.actions[0], attempt)
    assert chips[0] == cards.Chip("slow", "slow call", "over 10 s")
    assert [chip.kind for chip in chips[1:]] == [kind.chip for kind in ROUND_KINDS]


def test_counters_follow_each_change_without_counting_again() -> None:
    from datetime import UTC, datetime, timedelta

    from observe.domain.facts import RoundFacts
    from observe.live.counters import Tally
    from observe.selectors import RoundFilter

    now = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
    tally = Tally(RoundFilter(has=frozenset({"rejection"})), (5, 7, 0, 0, 0, 0), {})
    new = RoundFacts.of("main", now - timedelta(seconds=10), [0, 1, 0, 0], ["a.search"])
    rejected = RoundFacts.of("main", now - timedelta(seconds=10), [1, 1, 0, 0], ["a.search"])
    tally.apply(1, None, new)  # no rejection: not in the filter
    assert (tally.counters(now).rounds, tally.counters(now).rate_rounds) == (5, 0)
    tally.apply(1, new, rejected)  # now it has one
    counters = tally.counters(now)
    assert (counters.rounds, counters.rejections, counters.early) == (6, 8, 1)
    assert (counters.rate_rounds, counters.rate_rejections) == (1, 1)
    # A minute later the round has left the per-minute figures, not the totals.
    later = tally.counters(now + timedelta(seconds=55))
    assert (later.rounds, later.rate_rounds) == (6, 0)
