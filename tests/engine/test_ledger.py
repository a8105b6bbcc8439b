from __future__ import annotations

import hashlib
import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.round.ledger import (
    Ledger,
    _canonical,
    action_key,
    fingerprint,
    slot_id,
    tool_call_id,
)

DELEGATE_PARAMS = {"charter": "A", "agent_alias": "strong_agent"}


def test_it_reproduces_the_design_test_vector() -> None:
    assert tool_call_id("turn-1", 2, 0) == "tc_5ca55cec48db"
    assert (
        fingerprint("react.delegate", DELEGATE_PARAMS)
        == "40b78e51de2d48e9f19370949ed7eafe6594198e5a75bc7896e0cd02e0a4681f"
    )


def test_it_hashes_the_slot_from_the_stripped_turn_and_clamped_numbers() -> None:
    expected = hashlib.sha256(b"turn-1\x1f0\x1f0").hexdigest()
    assert slot_id("  turn-1 ", -4, -1) == expected
    assert action_key("turn-1", 0, 0) == "early-tool:" + expected
    assert tool_call_id("turn-1", 0, 0) == "tc_" + expected[:12]


def test_it_gives_each_slot_its_own_identity() -> None:
    ids = {tool_call_id("turn-1", it, index) for it in range(3) for index in range(3)}
    assert len(ids) == 9


def test_it_fingerprints_independently_of_key_order_and_tool_id_whitespace() -> None:
    reordered = {"agent_alias": "strong_agent", "charter": "A"}
    assert fingerprint(" react.delegate ", reordered) == fingerprint(
        "react.delegate", DELEGATE_PARAMS
    )
    assert fingerprint("react.delegate", {"charter": "B"}) != fingerprint(
        "react.delegate", {"charter": "A"}
    )


def test_it_keeps_non_ascii_params_as_is_in_the_fingerprint() -> None:
    params = {"charter": "Überprüfe 東京"}
    text = '{"params":{"charter":"Überprüfe 東京"},"tool_id":"react.delegate"}'
    assert fingerprint("react.delegate", params) == hashlib.sha256(text.encode()).hexdigest()
    escaped = json.dumps({"params": params, "tool_id": "react.delegate"}, sort_keys=True)
    assert fingerprint("react.delegate", params) != hashlib.sha256(escaped.encode()).hexdigest()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(tool=st.text(max_size=8), params=st.dictionaries(st.text(), _JSON, max_size=5))
def test_the_canonical_text_is_json_dumps_with_the_runtime_options(
    tool: str, params: dict[str, object]
) -> None:
    # The ledger keeps one C encoder instead of making one per call: the same text, NaN,
    # infinities, non-ASCII and control characters included.
    body = {"params": params, "tool_id": tool}
    assert _canonical(tool, params) == json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


@pytest.mark.parametrize("params", [None, ["charter"], "charter=A"])
def test_it_fingerprints_non_mapping_params_as_empty(params: object) -> None:
    assert fingerprint("react.delegate", params) == fingerprint("react.delegate", {})


def test_it_records_a_running_call_with_its_identity() -> None:
    ledger = Ledger()
    record = ledger.record(" turn-1 ", 2, 0, "react.delegate", DELEGATE_PARAMS)
    assert record.status == "running"
    assert record.turn_id == "turn-1"
    assert record.tool_call_id == "tc_5ca55cec48db"
    assert record.fingerprint.startswith("40b78e51")
    assert record.action_key == action_key("turn-1", 2, 0)


def test_it_finds_nothing_for_a_new_call() -> None:
    ledger = Ledger()
    ledger.record("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS)
    assert ledger.lookup("turn-1", 2, 1, "react.delegate", {"charter": "other"}) is None


def test_it_matches_the_slot_first_whatever_it_holds() -> None:
    ledger = Ledger()
    first = ledger.record("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS)
    found = ledger.lookup("turn-1", 2, 0, "jobs.launch", {"job": "x"})
    assert found == (first, "slot")


def test_it_prefers_the_slot_over_a_fingerprint_match() -> None:
    ledger = Ledger()
    at_0 = ledger.record("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS)
    at_1 = ledger.record("turn-1", 2, 1, "jobs.launch", {"job": "x"})
    assert ledger.lookup("turn-1", 2, 1, "react.delegate", DELEGATE_PARAMS) == (at_1, "slot")
    assert ledger.lookup("turn-1", 2, 3, "react.delegate", DELEGATE_PARAMS) == (at_0, "fingerprint")


def test_it_matches_a_reordered_sibling_by_fingerprint() -> None:
    ledger = Ledger()
    original = ledger.record("turn-1", 2, 1, "react.delegate", DELEGATE_PARAMS)
    reordered = {"agent_alias": "strong_agent", "charter": "A"}
    found = ledger.lookup("turn-1", 2, 4, "react.delegate ", reordered)
    assert found == (original, "fingerprint")


def test_it_still_dedups_a_failed_call() -> None:
    ledger = Ledger()
    record = ledger.record("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS)
    failed = ledger.finish(record, "failed")
    assert failed.status == "failed"
    assert ledger.lookup("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS) == (failed, "slot")
    assert ledger.lookup("turn-1", 2, 5, "react.delegate", DELEGATE_PARAMS) == (
        failed,
        "fingerprint",
    )


def test_it_never_matches_another_iteration_or_turn() -> None:
    ledger = Ledger()
    ledger.record("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS)
    assert ledger.lookup("turn-1", 3, 0, "react.delegate", DELEGATE_PARAMS) is None
    assert ledger.lookup("turn-1", 3, 1, "react.delegate", DELEGATE_PARAMS) is None
    assert ledger.lookup("turn-2", 2, 1, "react.delegate", DELEGATE_PARAMS) is None


def test_it_marks_a_finished_call_consumed() -> None:
    ledger = Ledger()
    record = ledger.record("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS)
    ledger.finish(record, "consumed")
    assert [r.status for r in ledger.records()] == ["consumed"]


def test_it_refuses_to_record_over_a_taken_slot() -> None:
    ledger = Ledger()
    ledger.record("turn-1", 2, 0, "react.delegate", DELEGATE_PARAMS)
    with pytest.raises(ValueError, match="already recorded"):
        ledger.record("turn-1", 2, 0, "jobs.launch", {})


def test_it_starts_a_call_only_once_when_tasks_race() -> None:
    ledger = Ledger()
    outcomes: list[str | None] = []
    barrier = threading.Barrier(8)

    def claim(index: int) -> None:
        barrier.wait()
        _, match = ledger.claim("turn-1", 2, index, "react.delegate", DELEGATE_PARAMS)
        outcomes.append(match)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count(None) == 1
    assert len(ledger) == 1
