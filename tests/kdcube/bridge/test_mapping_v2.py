"""The bridge on KDCube's default **v2** react agent (issue 37 §0), held to the envelopes v2's own
decision node and tool execution published (``tests/conformance/fixtures/kdcube-envelopes-v2.json``,
recorded by ``conformance.envelopes``): a protocol rejection is the round's rejected actions with
v2's code and the outcome ``retried``, the retries-exhausted exit is the turn's failure, an unknown
tool is visible, and the react version the envelopes prove rides on ``round.started``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance import fixtures
from kdcube.bridge.domain.mapping import V2_SILENT_RETRY, Mapper, v2_protocol_failure
from observe.domain.events import parse_event

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")

RECORDED = fixtures.read("kdcube-envelopes-v2")
RECORDED_V3 = fixtures.read("kdcube-envelopes")


def mapped(case_id: str | None = None, recorded: dict[str, Any] = RECORDED) -> list[dict[str, Any]]:
    mapper = Mapper({"main"})
    out: list[dict[str, Any]] = []
    for case in recorded["cases"]:
        if case_id is not None and case["id"] != case_id:
            continue
        for message in case["published"]:
            out.extend(
                mapper.feed_message(message["channel"], json.dumps(message["payload"])).events
            )
    return out


def of(
    events: list[dict[str, Any]], kind: str, iteration: int | None = None
) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["type"] == kind and (iteration is None or e["iteration"] == iteration)
    ]


def test_the_v2_fixture_comes_from_the_runtime_commit_of_the_other_families() -> None:
    assert RECORDED["runtime"] == RECORDED_V3["runtime"]
    assert {c["id"] for c in RECORDED["cases"]} == {
        "v2-two-channels-reask",
        "v2-bad-tool-call",
        "v2-final-answer-with-tool-call",
        "v2-retries-exhausted",
        "v2-unknown-tool",
        "v2-plain-call",
    }


def test_every_mapped_v2_event_is_valid_protocol_v1() -> None:
    events = mapped()
    assert events
    for event in events:
        parse_event(event)


def test_each_round_ends_as_v2_routed_the_decision() -> None:
    """The runtime's own route per decision (recorded beside the envelopes): a re-ask is a
    ``retried`` round, a tool run or a final answer ``ok``, an exit for a protocol failure
    ``failed``."""
    for case in RECORDED["cases"]:
        finished = {e["iteration"]: e for e in of(mapped(case["id"]), "round.finished")}
        for decision in case["runtime_v2"]:
            want = {"decision": "retried", "tool_execution": "ok"}.get(decision["route"])
            if decision["route"] == "exit":
                want = "failed" if decision["notes"] else "ok"
            got = finished[decision["iteration"]]["outcome"]
            assert got == want, (case["id"], decision, got)


def test_two_action_channels_are_both_rejected_and_the_model_asked_again() -> None:
    events = mapped("v2-two-channels-reask")
    rejected = of(events, "action.rejected", 0)
    assert [(e["action_index"], e["tool_id"], e["code"]) for e in rejected] == [
        (0, "workspace_jobs.search", "action_schema_error"),
        (1, "workspace_jobs.export_report", "action_schema_error"),
    ]
    assert rejected[0]["extra"] == {
        "react_version": "v2",
        "then": "retry",
        "parser_error": "multiple_channel_instances:2",
    }
    assert not of(events, "action.accepted", 0)
    assert of(events, "round.finished", 0)[0]["outcome"] == "retried"
    # The re-ask is the runtime's next iteration; its call ran.
    assert [e["tool_id"] for e in of(events, "tool.finished", 1)] == ["workspace_jobs.search"]


def test_a_bad_tool_call_is_rejected_with_the_parse_error() -> None:
    events = mapped("v2-bad-tool-call")
    (rejected,) = of(events, "action.rejected", 0)
    assert (rejected["action_index"], rejected["tool_id"], rejected["code"]) == (
        0,
        "workspace_jobs.search",
        "action_schema_error",
    )
    assert rejected["extra"]["parser_error"] == "1 validation error for Action"
    assert of(events, "round.finished", 0)[0]["outcome"] == "retried"


def test_a_final_answer_with_a_tool_call_is_a_retry_without_a_decision_step() -> None:
    events = mapped("v2-final-answer-with-tool-call")
    (finished,) = of(events, "round.finished", 0)
    assert finished["outcome"] == "retried"
    assert finished["inferred_from"] == V2_SILENT_RETRY
    assert not of(events, "action.accepted", 0)


def test_exhausted_retries_are_the_turn_failing_not_an_accepted_exit() -> None:
    events = mapped("v2-retries-exhausted")
    assert [e["outcome"] for e in of(events, "round.finished")] == ["retried", "retried", "failed"]
    last = of(events, "round.finished", 2)[0]
    assert last["error_code"] == "action_schema_error"
    assert last["error_message"] == "action_schema_error validation failed."
    assert not of(events, "action.accepted", 2)
    assert [e["extra"]["then"] for e in of(events, "action.rejected", 2)] == ["exit"]


def test_an_unknown_tool_is_visible_with_its_code() -> None:
    events = mapped("v2-unknown-tool")
    observed = of(events, "action.observed", 0)
    assert [(e["action_index"], e["tool_id"]) for e in observed] == [(0, "nope.tool")]
    (rejected,) = of(events, "action.rejected", 0)
    assert (rejected["tool_id"], rejected["code"]) == ("nope.tool", "tool_signature_red")
    assert not of(events, "tool.started", 0)


def test_a_plain_call_is_accepted_and_proves_no_version() -> None:
    events = mapped("v2-plain-call")
    assert [e["outcome"] for e in of(events, "round.finished")] == ["ok", "ok"]
    assert [e["tool_id"] for e in of(events, "tool.finished")] == ["workspace_jobs.search"]
    assert not [e for e in events if "react_version" in e]


def test_the_version_v2_proved_rides_on_the_turns_later_rounds() -> None:
    events = mapped("v2-retries-exhausted")
    started = of(events, "round.started")
    assert [e.get("react_version") for e in started] == [None, "v2", "v2"]
    assert "protocol failure" in started[1]["inferred_from"]
    # The round that proved it says so where it ends.
    assert of(events, "round.finished", 0)[0]["react_version"] == "v2"


def test_no_recorded_v3_round_is_taken_for_v2() -> None:
    events = mapped(recorded=RECORDED_V3)
    versions = {e["turn_id"]: e["react_version"] for e in events if "react_version" in e}
    # turn-a (early start), turn-c (rejections), turn-b (early start) proved v3; none v2.
    assert set(versions.values()) == {"v3"}
    assert {"turn-a", "turn-b", "turn-c"} <= set(versions)


def test_a_multi_action_instance_delta_proves_v3() -> None:
    payload = json.loads(json.dumps(RECORDED["cases"][-1]["published"][0]["payload"]))
    payload["data"]["event"]["agent"] = "solver.react.v2.decision (0).i1"
    mapper = Mapper({"main"})
    channel = RECORDED["cases"][-1]["published"][0]["channel"]
    (started,) = mapper.feed_message(channel, json.dumps(payload)).events
    assert started["react_version"] == "v3"


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (
            {"notes": "tool_call_invalid; retry decision", "action": "call_tool"},
            ("retry", "tool_call_invalid"),
        ),
        ({"notes": "action_schema_error; retry action"}, ("retry", "action_schema_error")),
        ({"action": "exit", "notes": "tool_signature_red"}, ("exit", "tool_signature_red")),
        (
            {"action": "exit", "final_answer": "Decision validation failed."},
            ("exit", "decision_invalid"),
        ),
        ({"action": "exit", "final_answer": "bye"}, None),
        ({"action": "complete", "notes": "action_schema_error"}, None),
        ({"action": "call_tool", "notes": "retry decision please"}, None),
    ],
)
def test_v2_protocol_failures_are_read_from_the_decision_step(
    data: dict[str, Any], found: tuple[str, str] | None
) -> None:
    assert v2_protocol_failure(data) == found


def test_a_schema_error_step_with_hostile_raw_text_is_mapped_without_crashing() -> None:
    """The raw text is the model's: deep nesting, non-objects and junk in action channels each
    give an action of unknown tool, never an exception."""
    case = next(c for c in RECORDED["cases"] if c["id"] == "v2-bad-tool-call")
    deep = "[" * 20_000 + "]" * 20_000
    raw = "".join(
        f"<channel:action>{text}</channel:action>" for text in (deep, "[1]", "{nope", '"x"')
    )
    mapper, events = Mapper({"main"}), []
    for message in case["published"]:
        payload = json.loads(json.dumps(message["payload"]))
        if payload["data"]["type"] == "solver.react.decision":
            payload["data"]["data"]["raw"] = raw
        events += mapper.feed_message(message["channel"], json.dumps(payload)).events
    rejected = of(events, "action.rejected", 0)
    assert [(e["action_index"], e["tool_id"]) for e in rejected] == [
        (0, None),
        (1, None),
        (2, None),
        (3, None),
    ]
    for event in events:
        parse_event(event)
