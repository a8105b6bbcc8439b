from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.vocabulary import EVENT_TYPES
from observe.domain.events import EventError, parse_event, same_content

EVENT_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
HASH = "ab" * 32

#: A valid payload per type: exactly the fields the §4 table requires.
PAYLOADS: dict[str, dict[str, Any]] = {
    "round.started": {"max_actions": 2},
    "action.observed": {"action_index": 0, "action": "call_tool", "tool_id": "a.search"},
    "action.accepted": {"action_index": 0, "tool_id": "a.search"},
    "action.rejected": {"action_index": 1, "tool_id": "a.write", "code": "x"},
    "tool.early_started": {
        "action_index": 0,
        "tool_id": "react.delegate",
        "tool_call_id": "tc_5ca55cec48db",
        "fingerprint": HASH,
    },
    "tool.started": {"action_index": 0, "tool_id": "a.search", "tool_call_id": "c1"},
    "tool.finished": {
        "action_index": 0,
        "tool_id": "a.search",
        "tool_call_id": "c1",
        "status": "ok",
        "duration_ms": 12.5,
    },
    "ledger.dedup": {
        "action_index": 1,
        "tool_id": "react.delegate",
        "tool_call_id": "tc_5ca55cec48db",
        "original_action_index": 0,
        "match": "fingerprint",
        "fingerprint": HASH,
    },
    "tool.timeout": {
        "action_index": 0,
        "tool_id": "a.export",
        "tool_call_id": "c2",
        "limit_ms": 2000,
        "elapsed_ms": 2013,
    },
    "generation.finished": {},
    "round.finished": {"outcome": "ok"},
}

#: Optional fields: absent and null are the same content, so both are stored as null.
OPTIONAL_NULLS: dict[str, tuple[str, ...]] = {
    "round.started": ("policy_hash",),
    "action.accepted": ("strategy",),
    "action.rejected": ("extra",),
    "tool.timeout": ("async_alternative",),
}


def raw(event_type: str = "action.observed", **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event_id": EVENT_ID,
        "ts": "2026-11-29T18:53:59.123Z",
        "agent": "main",
        "turn_id": "turn-1",
        "iteration": 0,
        "type": event_type,
        **PAYLOADS[event_type],
    }
    event.update(fields)
    return event


def error_of(event: Any) -> str:
    with pytest.raises(EventError) as caught:
        parse_event(event)
    return str(caught.value)


def test_it_knows_every_type_of_the_protocol_table() -> None:
    assert tuple(PAYLOADS) == EVENT_TYPES


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_it_accepts_each_type_with_its_required_fields(event_type: str) -> None:
    event = parse_event(raw(event_type))
    assert event.type == event_type
    assert event.round_key == ("main", "turn-1", 0)
    for name, value in PAYLOADS[event_type].items():
        assert event.data[name] == value


@pytest.mark.parametrize(
    ("event_type", "field"),
    [(t, f) for t, payload in PAYLOADS.items() for f in payload]
    + [(t, f) for t in EVENT_TYPES for f in ("event_id", "ts", "agent", "turn_id", "iteration")],
)
def test_it_names_a_missing_required_field(event_type: str, field: str) -> None:
    event = raw(event_type)
    del event[field]
    assert error_of(event) == f"{field} is required"


@pytest.mark.parametrize(("event_type", "names"), OPTIONAL_NULLS.items())
def test_it_stores_an_absent_optional_field_as_null(
    event_type: str, names: tuple[str, ...]
) -> None:
    event = parse_event(raw(event_type))
    for name in names:
        assert event.data[name] is None
    assert same_content(event, parse_event(raw(event_type, **dict.fromkeys(names))))


def test_it_keeps_params_absent_when_they_were_not_sent() -> None:
    # A call without params is never early (§2.4): absent must stay distinguishable from null.
    absent = parse_event(raw())
    null = parse_event(raw(params=None))
    assert "params" not in absent.data
    assert null.data["params"] is None
    assert not same_content(absent, null)


def test_it_keeps_params_of_any_json_shape() -> None:
    params = {"q": ["x", {"deep": None}], "n": 1.5}
    assert parse_event(raw(params=params)).data["params"] == params
    assert parse_event(raw(params="redacted")).data["params"] == "redacted"


def test_it_keeps_unknown_extra_fields() -> None:
    event = parse_event(raw(runtime_version="7.1", trace={"span": "abc"}))
    assert event.data["runtime_version"] == "7.1"
    assert event.data["trace"] == {"span": "abc"}


def test_it_rejects_an_unknown_type_naming_it_and_the_known_types() -> None:
    message = error_of(raw(type="tool.exploded"))
    assert message.startswith("unknown event type 'tool.exploded'; known types are ")
    assert "round.started" in message
    assert "round.finished" in message


def test_it_rejects_an_event_that_is_not_an_object() -> None:
    assert error_of([raw()]) == "an event must be a JSON object, got a list"


@pytest.mark.parametrize(
    "value",
    [
        "0F8FAD5B-D9CB-469F-A165-70867728950E",
        "0f8fad5bd9cb469fa16570867728950e",
        "{0f8fad5b-d9cb-469f-a165-70867728950e}",
    ],
)
def test_it_normalizes_the_event_id_to_lowercase_canonical_form(value: str) -> None:
    assert parse_event(raw(event_id=value)).event_id == EVENT_ID


@pytest.mark.parametrize("value", ["not-a-uuid", "", 42, None, "0f8fad5b-d9cb-469f-a165"])
def test_it_rejects_an_event_id_that_is_not_a_uuid(value: Any) -> None:
    assert error_of(raw(event_id=value)).startswith("event_id must be a UUID string, got ")


@pytest.mark.parametrize(
    ("value", "iso"),
    [
        ("2026-11-29T18:53:59.123Z", "2026-11-29T18:53:59.123Z"),
        ("2026-11-29T19:53:59.123+01:00", "2026-11-29T18:53:59.123Z"),
        ("2026-11-29t18:53:59.123456789z", "2026-11-29T18:53:59.123Z"),
        ("2026-11-29 18:53:59Z", "2026-11-29T18:53:59.000Z"),
        ("2026-11-29T00:15:00-05:30", "2026-11-29T05:45:00.000Z"),
        (1795978439123, "2026-11-29T18:53:59.123Z"),
        (1795978439123.9, "2026-11-29T18:53:59.123Z"),
        (0, "1970-01-01T00:00:00.000Z"),
    ],
)
def test_it_normalizes_ts_to_utc_milliseconds(value: Any, iso: str) -> None:
    event = parse_event(raw(ts=value))
    assert event.data["ts"] == iso
    assert event.ts.tzinfo is UTC
    assert event.ts == datetime.fromisoformat(iso)


def test_it_treats_epoch_milliseconds_and_rfc3339_as_the_same_content() -> None:
    as_string = parse_event(raw(ts="2026-11-29T19:53:59.123+01:00"))
    as_number = parse_event(raw(ts=1795978439123))
    assert same_content(as_string, as_number)
    assert not same_content(as_string, parse_event(raw(ts=1795978439124)))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-11-29T18:53:59", "ts must be an RFC 3339 date-time with a time zone offset"),
        ("yesterday", "ts must be an RFC 3339 date-time with a time zone offset"),
        ("2026-02-30T00:00:00Z", "ts is not a valid date and time"),
        ("2026-11-29T18:53:60Z", "ts is not a valid date and time"),
        ("0001-01-01T00:00:00+01:00", "ts is not a valid date and time"),
        (True, "ts must be an RFC 3339 string or epoch milliseconds"),
        (None, "ts must be an RFC 3339 string or epoch milliseconds"),
        (float("nan"), "ts must be finite epoch milliseconds"),
        (10**20, "ts is out of range"),
    ],
)
def test_it_rejects_a_ts_it_cannot_place_in_time(value: Any, message: str) -> None:
    assert error_of(raw(ts=value)).startswith(message)


def test_it_says_which_value_broke_the_iteration_rule() -> None:
    assert error_of(raw(iteration=-1)) == "iteration must be an integer ≥ 0, got -1"


@pytest.mark.parametrize("field", ["iteration", "attempt", "action_index"])
@pytest.mark.parametrize("value", [-1, True, 1.0, "1", None])
def test_it_rejects_a_count_that_is_not_a_non_negative_integer(field: str, value: Any) -> None:
    assert error_of(raw(**{field: value})).startswith(f"{field} must be an integer ≥ 0, got ")


def test_it_bounds_counts_to_32_bit_integers() -> None:
    assert parse_event(raw(iteration=2**31 - 1)).iteration == 2**31 - 1
    assert error_of(raw(iteration=2**31)) == "iteration must be at most 2147483647, got 2147483648"


def test_it_defaults_the_attempt_to_zero_and_stores_it() -> None:
    event = parse_event(raw())
    assert event.attempt == 0
    assert event.data["attempt"] == 0
    assert same_content(event, parse_event(raw(attempt=0)))
    assert parse_event(raw(attempt=3)).attempt == 3


@pytest.mark.parametrize("field", ["agent", "turn_id"])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must be a non-empty string"),
        ("   ", "must be a non-empty string"),
        (7, "must be a non-empty string"),
        ("x" * 201, "must be at most 200 characters"),
        ("a\x00b", "must not contain a NUL character"),
    ],
)
def test_it_rejects_a_bad_agent_or_turn(field: str, value: Any, message: str) -> None:
    assert error_of(raw(**{field: value})).startswith(f"{field} {message}")


def test_it_refuses_exactly_the_control_characters_in_names() -> None:
    """Unicode's control characters (category Cc, all below U+00A0) are refused in names, each
    named with its position; every other character is a name's own business (format and
    separator characters included; the first 12k code points and every 97th after them)."""
    codes = [*range(0x3000), *range(0x3000, 0x110000, 97)]
    chars = [chr(code) for code in codes if not 0xD800 <= code <= 0xDFFF and code != 0]
    refused: dict[str, str] = {}
    for char in chars:
        try:
            parse_event(raw(agent=f"ag{char}"))
        except EventError as exc:
            refused[char] = str(exc)
    control = [char for char in chars if unicodedata.category(char) == "Cc"]
    assert refused == {
        char: f"agent must not contain control characters (U+{ord(char):04X} at position 2)"
        for char in control
    }


def test_it_accepts_a_turn_id_with_slashes_up_to_200_characters() -> None:
    turn = "tenant/42/" + "t" * 190
    assert parse_event(raw(turn_id=turn)).turn_id == turn


@pytest.mark.parametrize("event_type", ["action.observed", "action.accepted", "tool.started"])
def test_it_allows_a_null_tool_id_but_requires_the_key(event_type: str) -> None:
    assert parse_event(raw(event_type, tool_id=None)).data["tool_id"] is None
    event = raw(event_type)
    del event["tool_id"]
    assert error_of(event) == "tool_id is required"


@pytest.mark.parametrize("value", ["", "x" * 201, 5, ["a"]])
def test_it_rejects_a_tool_id_that_is_not_a_short_string(value: Any) -> None:
    assert error_of(raw(tool_id=value)).startswith("tool_id must be ")


@pytest.mark.parametrize(
    ("event_type", "field", "value", "message"),
    [
        ("tool.finished", "status", "timeout", "status must be one of ok, error, got 'timeout'"),
        ("ledger.dedup", "match", "tool", "match must be one of slot, fingerprint, got 'tool'"),
        ("round.finished", "outcome", "done", "outcome must be one of ok, retried, failed"),
        ("tool.finished", "duration_ms", -1, "duration_ms must be a number ≥ 0, got -1"),
        ("tool.finished", "duration_ms", True, "duration_ms must be a number ≥ 0, got true"),
        ("tool.timeout", "limit_ms", "2s", "limit_ms must be a number ≥ 0, got '2s'"),
        ("tool.timeout", "elapsed_ms", float("inf"), "elapsed_ms must be a number ≥ 0"),
        ("round.started", "max_actions", -2, "max_actions must be an integer ≥ 0, got -2"),
        ("round.started", "policy_hash", "abc", "policy_hash must be a sha256 hex string"),
        ("tool.early_started", "fingerprint", "x" * 64, "fingerprint must be a sha256 hex"),
        ("ledger.dedup", "original_action_index", -1, "original_action_index must be an integ"),
        ("action.rejected", "extra", ["first_index"], "extra must be an object or null"),
        ("action.rejected", "code", "", "code must be a non-empty string"),
        ("action.accepted", "strategy", "neutral", "strategy must be a list of strings"),
        ("action.accepted", "strategy", ["neutral", 3], "strategy must be a list of strings"),
        ("action.observed", "action", None, "action must be a string, got null"),
        ("tool.started", "tool_call_id", "", "tool_call_id must be a non-empty string"),
        ("tool.timeout", "async_alternative", 3, "async_alternative must be a non-empty str"),
    ],
)
def test_it_rejects_a_type_field_that_breaks_its_rule(
    event_type: str, field: str, value: Any, message: str
) -> None:
    assert error_of(raw(event_type, **{field: value})).startswith(message)


def test_it_lowercases_hashes_so_case_does_not_change_the_content() -> None:
    upper = parse_event(raw("round.started", policy_hash="AB" * 32))
    assert upper.data["policy_hash"] == HASH
    assert same_content(upper, parse_event(raw("round.started", policy_hash=HASH)))


def test_it_accepts_an_unsupported_action_name() -> None:
    # The overseer rejects it (rule 1); the event itself must still be stored.
    event = parse_event(raw(action="think", tool_id=None))
    assert event.data["action"] == "think"


def test_it_gives_the_action_index_only_for_action_events() -> None:
    assert parse_event(raw("tool.started", action_index=3)).action_index == 3
    assert parse_event(raw("round.started")).action_index is None


def test_it_does_not_change_the_event_it_was_given() -> None:
    event = raw(ts=1795978439123)
    parse_event(event)
    assert event["ts"] == 1795978439123
    assert "attempt" not in event


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    event_type=st.sampled_from(EVENT_TYPES),
    field=st.sampled_from(
        sorted({name for payload in PAYLOADS.values() for name in payload} | {"ts", "iteration"})
    ),
    value=JSON,
)
def test_it_answers_any_value_with_an_event_or_an_event_error(
    event_type: str, field: str, value: Any
) -> None:
    # Bad input must be reported (a 422 with a sentence), never crash the ingest with a 500.
    try:
        outcome: Any = parse_event(raw(event_type, **{field: value}))
    except EventError as error:
        outcome = error
    if isinstance(outcome, EventError):
        assert str(outcome).startswith(field) or "event type" in str(outcome)
    else:
        assert outcome.type == event_type


@pytest.mark.parametrize("field", ["ts", "duration_ms"])
def test_it_rejects_a_number_too_large_for_json_clients_with_an_event_error(field: str) -> None:
    raw = {
        "event_id": "0b7c4a1e-8f8e-4d5c-9a3b-2f1e6d7c8b9a",
        "ts": "2026-11-29T10:00:00Z",
        "agent": "main",
        "turn_id": "t",
        "iteration": 0,
        "type": "tool.finished",
        "action_index": 0,
        "tool_id": "x.y",
        "tool_call_id": "tc_1",
        "status": "ok",
        "duration_ms": 5,
    }
    raw[field] = 10**400
    with pytest.raises(EventError, match=field):
        parse_event(raw)


@pytest.mark.parametrize(
    ("event_type", "field", "value"),
    [
        ("tool.finished", "duration_ms", 86_400_001),
        ("tool.finished", "duration_ms", 1e12),
        ("tool.timeout", "elapsed_ms", 86_400_000.5),
        ("tool.timeout", "elapsed_ms", 2**52),
    ],
)
def test_it_refuses_a_duration_beyond_a_day(event_type: str, field: str, value: Any) -> None:
    assert error_of(raw(event_type, **{field: value})).startswith(
        f"{field} must be at most 86400000 ms (a day)"
    )


@pytest.mark.parametrize(
    ("event_type", "field", "value"),
    [("tool.finished", "duration_ms", 86_400_000), ("tool.timeout", "elapsed_ms", 0)],
)
def test_it_accepts_a_duration_from_zero_to_a_day(event_type: str, field: str, value: Any) -> None:
    assert parse_event(raw(event_type, **{field: value})).data[field] == value


ERROR_FIELDS = [
    ("round.finished", "error_code"),
    ("round.finished", "error_message"),
    ("tool.finished", "error_code"),
    ("tool.finished", "error_message"),
    ("tool.timeout", "runtime_error_code"),
]


@pytest.mark.parametrize(("event_type", "name"), ERROR_FIELDS)
def test_it_keeps_a_failure_reason_of_up_to_2000_characters(event_type: str, name: str) -> None:
    text = "HTTP 503 from the backend: <Service Unavailable> " + "é" * 1951
    assert len(text) == 2000
    assert parse_event(raw(event_type, **{name: text})).data[name] == text
    assert error_of(raw(event_type, **{name: text + "x"})) == (
        f"{name} must be at most 2000 characters, got 2001"
    )


@pytest.mark.parametrize(("event_type", "name"), ERROR_FIELDS)
def test_it_refuses_control_characters_in_a_failure_reason(event_type: str, name: str) -> None:
    assert error_of(raw(event_type, **{name: "line one\nline two"})) == (
        f"{name} must not contain control characters (U+000A at position 8)"
    )
    for bad in ("", "  ", 503, ["x"]):
        assert f"{name} must be a non-empty string or null" in error_of(
            raw(event_type, **{name: bad})
        )


@pytest.mark.parametrize(("event_type", "name"), ERROR_FIELDS)
def test_an_absent_failure_reason_stays_absent_as_before(event_type: str, name: str) -> None:
    # Absent and null are the same content, and neither adds the key: an event stored before
    # the field existed keeps exactly its content.
    absent, null = parse_event(raw(event_type)), parse_event(raw(event_type, **{name: None}))
    assert name not in absent.data
    assert same_content(absent, null)


@pytest.mark.parametrize("value", ["true", 1, 0, [], {}])
def test_exec_code_complete_is_true_false_or_null(value: Any) -> None:
    assert error_of(raw("generation.finished", exec_code_complete=value)).startswith(
        "exec_code_complete must be true, false or null"
    )


def test_exec_code_complete_null_is_not_reported() -> None:
    assert (
        "exec_code_complete"
        not in parse_event(raw("generation.finished", exec_code_complete=None)).data
    )
    said = parse_event(raw("generation.finished", exec_code_complete=False)).data
    assert said["exec_code_complete"] is False
