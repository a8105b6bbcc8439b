"""POST /api/v1/events: every status of DESIGN §6 / issue 5, per-event verdicts, and that no
body — however broken — becomes a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st

from core.vocabulary import EVENT_TYPES
from observe.models import Event, Round
from tests.observe.ingest_support import (
    EVENTS_URL,
    bearer,
    event,
    load_sample_into_draft,
    post_events,
    simulated_rounds,
    started,
    token,
)

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


@pytest.fixture
def writer() -> str:
    return token("events:write")


def observed(index: int = 0, **kwargs: Any) -> dict[str, Any]:
    return event(
        "action.observed",
        action_index=index,
        action="call_tool",
        tool_id="workspace_jobs.search",
        params={"q": "x"},
        **kwargs,
    )


# --- 200 ------------------------------------------------------------------------------------


def test_it_stores_a_well_formed_batch_and_counts_it(client: Client, writer: str) -> None:
    events = simulated_rounds(1)[0]
    response = post_events(client, events, writer)
    assert response.status_code == 200
    assert response.json() == {"accepted": len(events), "duplicates": 0, "rejected": []}
    assert Event.objects.count() == len(events)
    assert Round.objects.count() == 1


def test_it_accepts_a_json_content_type_with_a_charset(client: Client, writer: str) -> None:
    response = client.post(
        EVENTS_URL,
        data=json.dumps({"events": [started()]}),
        content_type="application/json; charset=utf-8",
        headers=bearer(writer),
    )
    assert response.status_code == 200


def test_it_stores_the_valid_events_of_a_mixed_batch_and_reports_the_others_by_index(
    client: Client, writer: str
) -> None:
    batch: list[Any] = [
        started(),
        {**observed(), "type": "action.exploded"},
        observed(),
        {**observed(1), "iteration": -1},
        "not an object",
    ]
    response = post_events(client, batch, writer)
    assert response.status_code == 200
    body = response.json()
    assert (body["accepted"], body["duplicates"]) == (2, 0)
    assert [item["index"] for item in body["rejected"]] == [1, 3, 4]
    errors = [item["error"] for item in body["rejected"]]
    assert errors[0].startswith("unknown event type 'action.exploded'; known types are")
    assert "iteration must be an integer ≥ 0" in errors[1]
    assert "must be a JSON object" in errors[2]
    stored = set(Event.objects.values_list("event_id", flat=True))
    assert stored == {batch[0]["event_id"], batch[2]["event_id"]}


def test_a_batch_of_only_invalid_events_is_200_with_every_one_rejected(
    client: Client, writer: str
) -> None:
    response = post_events(client, [{"type": "nope"}, {}], writer)
    assert response.status_code == 200
    assert response.json()["accepted"] == 0
    assert [item["index"] for item in response.json()["rejected"]] == [0, 1]
    assert not Round.objects.exists()


def test_a_repeated_event_counts_as_one_duplicate_and_is_stored_once(
    client: Client, writer: str
) -> None:
    first = started()
    response = post_events(client, [first, first, observed()], writer)
    assert response.json() == {"accepted": 2, "duplicates": 1, "rejected": []}
    again = post_events(client, [first, observed(1)], writer)
    # accepted counts newly stored events only.
    assert again.json() == {"accepted": 1, "duplicates": 1, "rejected": []}
    assert Event.objects.filter(event_id=first["event_id"]).count() == 1
    assert Event.objects.count() == 3


def test_the_same_event_with_ts_in_epoch_ms_is_a_duplicate(client: Client, writer: str) -> None:
    first = started(ts="2026-11-29T18:00:00.250Z")
    as_epoch = {**first, "ts": 1795975200250}
    post_events(client, [first], writer)
    assert post_events(client, [as_epoch], writer).json()["duplicates"] == 1


def test_it_rejects_an_event_id_reused_with_different_content(client: Client, writer: str) -> None:
    original = started()
    post_events(client, [original], writer)
    changed = {**original, "max_actions": 3}
    response = post_events(client, [changed], writer)
    assert response.json() == {
        "accepted": 0,
        "duplicates": 0,
        "rejected": [{"index": 0, "error": "event_id reused with different content"}],
    }
    assert Event.objects.get(event_id=original["event_id"]).data["max_actions"] == 2


def test_a_reused_event_id_inside_one_batch_is_rejected(client: Client, writer: str) -> None:
    original = started()
    response = post_events(client, [original, {**original, "max_actions": 5}], writer)
    assert response.json()["accepted"] == 1
    assert response.json()["rejected"] == [
        {"index": 1, "error": "event_id reused with different content"}
    ]


def test_rounds_of_an_agent_not_in_the_policy_are_stored_and_marked(
    client: Client, writer: str
) -> None:
    load_sample_into_draft()
    post_events(client, [started(agent="main"), started(agent="ghost")], writer)
    marks = dict(Round.objects.values_list("agent", "agent_in_policy"))
    assert marks == {"main": True, "ghost": False}


# --- bad values inside an event: rejected by index, never a 500 -----------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"agent": "ma\x00in"}, "agent must not contain a NUL character"),
        ({"turn_id": "t\x00"}, "turn_id must not contain a NUL character"),
        ({"max_actions": 10**30}, "max_actions must be at most"),
        ({"ts": 10**30}, "ts is out of range"),
        ({"ts": 10**400}, "ts is out of range"),
        ({"note": "kept\x00unknown"}, "note must not contain a NUL character"),
        ({"note": {"k\x00": 1}}, "a field name in note contains a NUL character"),
        ({"note": [1, 2, 10**19]}, "note[2] is out of range"),
        ({"note": 10**400}, "note is out of range"),
        ({"agent": "team/main"}, "agent must not contain '/'"),
    ],
)
def test_an_unstorable_value_rejects_only_its_event(
    bad: dict[str, Any], message: str, client: Client, writer: str
) -> None:
    response = post_events(client, [{**started(), **bad}, started(turn_id="fine")], writer)
    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 1
    (rejected,) = body["rejected"]
    assert rejected["index"] == 0
    assert message in rejected["error"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"q": "a\x00b"}, "params.q must not contain a NUL character"),
        ({"n": -(10**20)}, "params.n is out of range"),
    ],
)
def test_params_are_held_to_the_storage_limits(
    params: dict[str, Any], message: str, client: Client, writer: str
) -> None:
    response = post_events(client, [{**observed(), "params": params}], writer)
    assert message in response.json()["rejected"][0]["error"]


def test_a_huge_duration_is_rejected_not_a_crash(client: Client, writer: str) -> None:
    finished = event(
        "tool.finished",
        action_index=0,
        tool_id="a.search",
        tool_call_id="c1",
        status="ok",
        duration_ms=10**400,
    )
    response = post_events(client, [finished], writer)
    assert response.status_code == 200
    assert "duration_ms is out of range" in response.json()["rejected"][0]["error"]


def test_deeply_nested_params_are_rejected(client: Client, writer: str) -> None:
    params: Any = "leaf"
    for _ in range(200):
        params = {"a": params}
    response = post_events(client, [{**observed(), "params": params}], writer)
    assert response.status_code == 200
    assert "nests deeper than 64 levels" in response.json()["rejected"][0]["error"]


def test_unicode_and_large_but_storable_values_are_kept(client: Client, writer: str) -> None:
    params = {"q": "héllo ✓ <script>", "n": 2**63 - 1, "f": 1.5e308, "deep": [[[[1]]]]}
    sent = {**observed(), "params": params}
    assert post_events(client, [sent], writer).json()["accepted"] == 1
    stored = Event.objects.get(event_id=sent["event_id"]).data["params"]
    # Stored as JSON text on both databases (on PostgreSQL a ``json`` column since issue 39;
    # ``jsonb`` had turned 1.5e308 into the integer 15 followed by 307 zeros).
    assert stored == params


# --- 400 / 413 / 415 / 422 ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"not json",
        b"\xff\xfe\x00garbage",
        b'{"events": [NaN]}',
        b'{"events": [{"ts": Infinity}]}',
        b"[" * 100_000 + b"]" * 100_000,
        b"",
    ],
    ids=["truncated", "text", "not-utf8", "nan", "infinity", "too-deep", "empty"],
)
def test_a_body_that_is_not_json_is_400(body: bytes, client: Client, writer: str) -> None:
    # The test client drops the content type of an empty body; a real client sends it.
    response = post_events(client, body, writer, CONTENT_TYPE="application/json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("The body is not valid JSON")
    assert not Event.objects.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must be a JSON object"),
        ("events", "must be a JSON object"),
        (None, "must be a JSON object"),
        ({}, "must hold a list of events"),
        ({"events": {"0": {}}}, "must hold a list of events"),
        ({"events": None}, "must hold a list of events"),
        ({"event": [{}]}, "must hold a list of events"),
        ({"events": []}, "The events list is empty"),
    ],
)
def test_json_of_the_wrong_shape_is_422(
    data: Any, message: str, client: Client, writer: str
) -> None:
    response = post_events(client, json.dumps(data), writer)
    assert response.status_code == 422
    assert message in response.json()["error"]
    assert set(response.json()) == {"error"}


def test_exactly_1000_events_are_taken(client: Client, writer: str) -> None:
    batch = [started(), *(observed(i) for i in range(999))]
    response = post_events(client, batch, writer)
    assert response.status_code == 200
    assert response.json()["accepted"] == 1000


def test_more_than_1000_events_is_413_and_stores_nothing(client: Client, writer: str) -> None:
    batch = [started(turn_id=f"t{i}") for i in range(1001)]
    response = post_events(client, batch, writer)
    assert response.status_code == 413
    assert "at most 1000 events" in response.json()["error"]
    assert not Event.objects.exists()


def test_a_body_over_one_mib_is_413(client: Client, writer: str) -> None:
    big = {**observed(), "params": {"blob": "x" * MIB}}
    response = post_events(client, [big], writer)
    assert response.status_code == 413
    assert "over the limit" in response.json()["error"]
    assert not Event.objects.exists()


def test_a_body_of_exactly_one_mib_is_read(client: Client, writer: str) -> None:
    shell = json.dumps({"events": [{**observed(), "params": {"blob": ""}}]})
    padded = shell.replace('"blob": ""', '"blob": "' + "x" * (MIB - len(shell)) + '"')
    assert len(padded.encode()) == MIB
    assert post_events(client, padded, writer).json()["accepted"] == 1


def test_a_declared_length_over_one_mib_is_413_before_reading(client: Client, writer: str) -> None:
    body = json.dumps({"events": [started()]})
    response = post_events(client, body, writer, CONTENT_LENGTH=str(MIB + 1))
    assert response.status_code == 413


def test_a_declared_length_past_djangos_own_limit_is_413_too(client: Client, writer: str) -> None:
    response = post_events(
        client, json.dumps({"events": [started()]}), writer, CONTENT_LENGTH="9" * 9
    )
    assert response.status_code == 413
    assert "error" in response.json()


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "application/x-www-form-urlencoded"]
)
def test_another_content_type_is_415(content_type: str, client: Client, writer: str) -> None:
    response = client.post(
        EVENTS_URL,
        data=json.dumps({"events": [started()]}),
        content_type=content_type,
        headers=bearer(writer),
    )
    assert response.status_code == 415
    assert "application/json" in response.json()["error"]
    assert not Event.objects.exists()


def test_a_form_post_is_415(client: Client, writer: str) -> None:
    response = client.post(EVENTS_URL, data={"events": "x"}, headers=bearer(writer))
    assert response.status_code == 415


# --- 401 / 403 ------------------------------------------------------------------------------


def test_without_a_token_it_is_401_json(client: Client) -> None:
    response = post_events(client, [started()], "")
    assert response.status_code == 401
    assert "Authentication required" in response.json()["error"]


@pytest.mark.parametrize("secret", ["nonsense", "tdk_000000000000_wrong"])
def test_a_bad_token_is_401(secret: str, client: Client) -> None:
    response = post_events(client, [started()], secret)
    assert response.status_code == 401
    assert not Event.objects.exists()


def test_a_token_without_events_write_is_403(client: Client) -> None:
    response = post_events(client, [started()], token("events:read", "config:read"))
    assert response.status_code == 403
    assert response.json() == {"error": "Not allowed: this token lacks the 'events:write' scope."}
    assert not Event.objects.exists()


def test_a_logged_in_browser_session_cannot_post_events(admin_client: Client) -> None:
    response = admin_client.post(
        EVENTS_URL, data=json.dumps({"events": [started()]}), content_type="application/json"
    )
    assert response.status_code == 401


def test_auth_is_checked_before_the_body(client: Client) -> None:
    response = client.post(EVENTS_URL, data=b"{", content_type="text/plain")
    assert response.status_code == 401


# --- never a 500 ----------------------------------------------------------------------------

FIELD_NAMES = [
    "event_id",
    "ts",
    "agent",
    "turn_id",
    "iteration",
    "attempt",
    "type",
    "action_index",
    "tool_id",
    "params",
    "extra",
    "max_actions",
    "policy_hash",
    "duration_ms",
    "status",
    "outcome",
    "note",
]
#: Values that broke, or could break, storage: past 64 bits or a float, NUL, '/', deep lists.
EDGES: st.SearchStrategy[Any] = st.sampled_from(
    [
        *(10**400, -(10**400), 2**63, -(2**63), -1, 1e308, -62135596800001, 253402300800000),
        *("\x00", "", "a/b", None, [], {}, [[[[[]]]]]),
        *("0001-01-01T00:00:00Z", "0001-01-01T00:30:00+01:00", "9999-12-31T23:59:59.999-00:01"),
    ]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["2026-11-29T18:00:00Z", *EVENT_TYPES])
    | st.uuids().map(str)
    | EDGES
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.sampled_from(FIELD_NAMES), inner, max_size=5)
    ),
    max_leaves=12,
)
# Valid events with a few fields replaced or added reach the store, not only the parser.
valid_events = st.fixed_dictionaries(
    {
        "event_id": st.uuids().map(str),
        "ts": st.sampled_from(["2026-11-29T18:00:00Z", 1795975200000]),
        "agent": st.sampled_from(["main", "ghost"]),
        "turn_id": st.sampled_from(["t", "a/b"]),
        "iteration": st.integers(0, 3),
        "type": st.sampled_from(EVENT_TYPES),
        "action_index": st.integers(0, 3),
        "original_action_index": st.just(0),
        "max_actions": st.integers(0, 3),
        "tool_id": st.sampled_from(["x.search", None]),
        "action": st.just("call_tool"),
        "tool_call_id": st.just("c1"),
        "code": st.just("max_actions"),
        "status": st.just("ok"),
        "duration_ms": st.just(12),
        "limit_ms": st.just(1000),
        "elapsed_ms": st.just(1001),
        "match": st.just("slot"),
        "fingerprint": st.just("ab" * 32),
        "outcome": st.just("ok"),
    }
)
near_events = st.builds(
    lambda base, noise: {**base, **noise},
    valid_events,
    st.dictionaries(st.sampled_from(FIELD_NAMES), EDGES | json_values, max_size=2),
)
bodies = (
    json_values
    | st.fixed_dictionaries({"events": json_values})
    | st.fixed_dictionaries({"events": st.lists(near_events | json_values, max_size=8)})
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=bodies)
def test_no_json_body_is_ever_a_server_error(body: Any, writer: str) -> None:
    response = post_events(Client(), json.dumps(body), writer)
    assert response.status_code in {200, 400, 413, 415, 422}
    if response.status_code != 200:
        assert set(response.json()) == {"error"}
    else:
        hypothesis_event(f"stored: {response.json()['accepted'] > 0}")
