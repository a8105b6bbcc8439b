"""The bridge's mapping on the envelopes the KDCube runtime's own emitters published
(``tests/conformance/fixtures/kdcube-envelopes.json``, recorded by ``conformance.envelopes``):
every event is valid protocol v1, the rounds say what the runtime decided, inference is marked,
replays map to the same event ids, and malformed envelopes are skipped with a reason."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from conformance import fixtures
from kdcube.bridge.domain.mapping import Mapper, map_agent, slot_call_id
from observe.domain.events import parse_event

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")

RECORDED = fixtures.read("kdcube-envelopes")
POLICY_AGENTS = {"main"}


def messages() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (case["id"], m["channel"], m["payload"])
        for case in RECORDED["cases"]
        for m in case["published"]
    ]


def mapped(mapper: Mapper | None = None) -> list[dict[str, Any]]:
    mapper = mapper or Mapper(POLICY_AGENTS)
    out: list[dict[str, Any]] = []
    for _, channel, payload in messages():
        out.extend(mapper.feed_message(channel, json.dumps(payload)).events)
    return out


def test_the_fixture_comes_from_the_runtime_commit_of_the_other_families() -> None:
    assert RECORDED["runtime"]["repository"] == "kdcube/kdcube-ai-app"
    assert RECORDED["runtime"]["commit"] == fixtures.read("rounds")["runtime"]["commit"]
    channels = {channel for _, channel, _ in messages()}
    assert channels == {"kdcube.relay.chatbot.acme:demo:chat.events.sess-1"}


def test_every_mapped_event_is_valid_protocol_v1() -> None:
    events = mapped()
    assert events
    for event in events:
        parse_event(event)


def test_rejections_and_early_starts_are_those_the_runtime_decided() -> None:
    events = mapped()
    by_stream: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for event in events:
        key = (event["turn_id"], event["iteration"], event.get("attempt", 0))
        by_stream.setdefault(key, []).append(event)
    for case in RECORDED["cases"]:
        spec = case["input"]["round"]
        streams = case["runtime_attempts"]
        for attempt, runtime in enumerate(streams):
            got = by_stream[(spec["turn_id"], spec["iteration"], attempt)]
            where = f"{case['id']} attempt {attempt}"
            rejected = {e["action_index"]: e["code"] for e in got if e["type"] == "action.rejected"}
            early = {e["action_index"] for e in got if e["type"] == "tool.early_started"}
            accepted = {e["action_index"] for e in got if e["type"] == "action.accepted"}
            assert rejected == {
                i: a["code"] for i, a in enumerate(runtime) if a["verdict"] == "rejected"
            }, where
            assert early == {i for i, a in enumerate(runtime) if a["early"]}, where
            if attempt == len(streams) - 1 and not case["input"].get("fails"):
                assert accepted == {
                    i for i, a in enumerate(runtime) if a["verdict"] == "accepted"
                }, where
            else:
                # A replaced stream, or one whose decision failed, shows only through its
                # early starts.
                assert accepted == early, where


def test_what_is_inferred_is_marked_and_what_has_no_signal_is_null() -> None:
    events = mapped()
    for event in events:
        reported = event["type"] == "action.rejected" and event["action_index"] is not None
        if reported and "inferred_from" not in event:
            assert "inferred" not in event  # the runtime gave code, extra and index itself
        else:
            assert event["inferred"] is True
    started = [e for e in events if e["type"] == "round.started"]
    assert started
    assert all(e["max_actions"] is None for e in started)
    early = [e for e in events if e["type"] == "tool.early_started"]
    assert early
    assert all(e["fingerprint"] is None for e in early)


def _case_events(case_id: str) -> list[dict[str, Any]]:
    case = next(c for c in RECORDED["cases"] if c["id"] == case_id)
    spec = case["input"]["round"]
    return [
        e
        for e in mapped()
        if (e["turn_id"], e["iteration"]) == (spec["turn_id"], spec["iteration"])
    ]


def test_it_names_a_rejected_final_answer() -> None:
    events = _case_events("final-answer-rejected")
    (observed,) = [e for e in events if e["type"] == "action.observed" and e["action_index"] == 1]
    assert (observed["action"], observed["tool_id"]) == ("complete", None)
    assert "'complete'" in observed["inferred_from"]
    (rejected,) = [e for e in events if e["type"] == "action.rejected"]
    assert rejected["code"] == "multi_action_bundle_final_answer_after_non_neutral"
    assert rejected["action_index"] == 1


def test_it_gives_a_single_action_rejection_index_zero() -> None:
    events = _case_events("protocol-rejected-single")
    kinds = {(e["type"], e.get("action_index")) for e in events}
    assert ("action.observed", 0) in kinds
    assert ("action.rejected", 0) in kinds
    (rejected,) = [e for e in events if e["type"] == "action.rejected"]
    assert rejected["code"] == "tool_call_invalid"
    assert "one action" in rejected["inferred_from"]
    # The decision step's retry is not a second action.
    assert {e["action_index"] for e in events if e["type"] == "action.observed"} == {0}


def test_a_restream_that_moves_another_tool_onto_an_early_slot_shows_every_action() -> None:
    events = _case_events("restream-moves-early-slot")
    accepted = {
        (e.get("attempt", 0), e["action_index"], e["tool_id"])
        for e in events
        if e["type"] == "action.accepted"
    }
    jobs = "workspace_jobs."
    assert accepted == {
        (0, 0, jobs + "launch_background_job"),
        (1, 0, jobs + "search"),
        (1, 1, jobs + "launch_background_job"),
    }
    notes = {e["inferred_from"] for e in events if "inferred_from" in e}
    assert any(note.startswith("re-stream") for note in notes)


def test_a_restream_that_ends_in_a_final_answer_keeps_the_answer() -> None:
    # Stream 1 started launch_background_job early at slot 0 and broke; stream 2 decided
    # complete at index 0 (one action, no bundle): the answer lands in attempt 1.
    events = _case_events("restream-final-answer")
    observed = {
        (e.get("attempt", 0), e["action_index"], e["action"], e["tool_id"])
        for e in events
        if e["type"] == "action.observed"
    }
    assert observed == {
        (0, 0, "call_tool", "workspace_jobs.launch_background_job"),
        (1, 0, "complete", None),
    }
    accepted = {
        (e.get("attempt", 0), e["action_index"]) for e in events if e["type"] == "action.accepted"
    }
    assert accepted == {(0, 0), (1, 0)}
    early = [e for e in events if e["type"] == "tool.early_started"]
    assert [(e.get("attempt", 0), e["action_index"]) for e in early] == [(0, 0)]
    (note,) = {e["inferred_from"] for e in events if "inferred_from" in e}
    assert note.startswith(
        "re-stream: the decision step puts a final answer (complete) at action 0"
    )
    (finished,) = [e for e in events if e["type"] == "round.finished"]
    assert finished["outcome"] == "ok"


@pytest.mark.parametrize(
    ("limit_s", "ended"),
    [(12, ("tool.timeout", None)), (240, ("tool.finished", "error"))],
    ids=["timed-out", "errored"],
)
def test_a_round_whose_only_call_failed_and_whose_turn_completed_is_ok(
    limit_s: float, ended: tuple[str, str | None]
) -> None:
    """The runtime's recording: the isolated call was killed and answered missing_tool_output,
    then the runtime published chat.complete ("Turn Completed", with the final answer). A tool's
    error is an observation the react loop goes on with, never a failed turn: KDCube publishes
    chat.error only when the turn itself raises (BaseEntrypoint.report_turn_error). So the round
    is ``ok``, with no error of its own; the call carries the error (or the inferred timeout)."""
    case = next(c for c in RECORDED["cases"] if c["id"] == "isolated-tool-killed-at-limit")
    kinds = [m["payload"]["data"]["type"] for m in case["published"]]
    assert kinds[-1] == "chat.complete"
    assert "chat.error" not in kinds
    assert case["published"][-1]["payload"]["data"]["event"]["status"] == "completed"
    mapper = Mapper(POLICY_AGENTS, isolation_timeout_s=limit_s)
    events = [
        e
        for m in case["published"]
        for e in mapper.feed_message(m["channel"], json.dumps(m["payload"])).events
    ]
    (call,) = [e for e in events if e["type"] in ("tool.timeout", "tool.finished")]
    assert (call["type"], call.get("status")) == ended
    (finished,) = [e for e in events if e["type"] == "round.finished"]
    assert finished["outcome"] == "ok"
    assert "error_code" not in finished
    assert "error_message" not in finished


@pytest.mark.parametrize(
    ("case_id", "code", "message"),
    [
        (
            "decision-provider-error",
            "ServiceException",
            "Provider rate limit reached (429): retry after 20 s",
        ),
        # The context-limit retry crashes in retry_with_compaction (force_sanitize twice).
        (
            "decision-context-limit-retry-crashes",
            "TypeError",
            "got multiple values for keyword argument 'force_sanitize'",
        ),
    ],
)
def test_a_failed_turn_ends_its_rounds_as_failed_with_the_runtime_error(
    case_id: str, code: str, message: str
) -> None:
    events = _case_events(case_id)
    (finished,) = [e for e in events if e["type"] == "round.finished"]
    assert finished["outcome"] == "failed"
    assert finished["error_code"] == code
    assert message in finished["error_message"]
    assert parse_event(finished).data["error_message"] == finished["error_message"]
    # An early start of the failed round stays what it was.
    case = next(c for c in RECORDED["cases"] if c["id"] == case_id)
    early = {i for i, row in enumerate(case["runtime"]) if row["early"]}
    assert {e["action_index"] for e in events if e["type"] == "tool.early_started"} == early


def test_a_chat_error_escapes_control_characters_and_bounds_the_message() -> None:
    case = next(c for c in RECORDED["cases"] if c["id"] == "decision-provider-error")
    envelopes = [m["payload"]["data"] for m in case["published"]]
    mapper = Mapper(POLICY_AGENTS)
    for envelope in envelopes[:-1]:
        mapper.feed(envelope)
    error = envelopes[-1]
    assert error["type"] == "chat.error"
    long = "line one\nline\ttwo\x00" + "x" * 5000
    sent = {**error, "data": {**error["data"], "error": long, "error_type": "Boom\r\n"}}
    (finished,) = mapper.feed(sent).events
    assert finished["error_code"] == "Boom\\r\\n"
    assert finished["error_message"].startswith("line one\\nline\\ttwo\\x00xx")
    assert len(finished["error_message"]) == 2000
    parse_event(finished)  # valid: nothing the protocol refuses
    # The turn's rounds are closed: a second chat.error (or chat.complete) has nothing to end.
    assert mapper.feed(sent).skipped == "chat.error with no open round of the turn"


ISOLATED = next(c for c in RECORDED["cases"] if c["id"] == "isolated-tool-killed-at-limit")


def _isolated_events(limit_s: float) -> list[dict[str, Any]]:
    mapper = Mapper(POLICY_AGENTS, isolation_timeout_s=limit_s)
    return [e for m in ISOLATED["published"] for e in mapper.feed(m["payload"]["data"]).events]


def test_an_isolated_call_killed_at_its_limit_is_a_timeout_not_an_error() -> None:
    # The runtime's subprocess runner killed the child at the limit; the runtime then found the
    # reserved result file missing and published missing_tool_output, dropping its timeout.
    limit_s = ISOLATED["input"]["isolation_limit_s"]
    result = next(
        m["payload"]["data"]
        for m in ISOLATED["published"]
        if m["payload"]["data"]["type"] == "react.tool.result"
    )
    assert result["data"]["error_code"] == "missing_tool_output"
    assert result["data"]["duration_ms"] >= limit_s * 1000
    events = _isolated_events(limit_s)
    assert [e for e in events if e["type"] == "tool.finished"] == []  # never both
    (timeout,) = [e for e in events if e["type"] == "tool.timeout"]
    assert timeout["inferred"] is True
    assert timeout["limit_ms"] == limit_s * 1000
    assert timeout["elapsed_ms"] == result["data"]["duration_ms"]
    assert timeout["runtime_error_code"] == "missing_tool_output"
    assert (timeout["action_index"], timeout["tool_id"]) == (0, "workspace_jobs.export_report")
    assert "missing_tool_output" in timeout["inferred_from"]
    parse_event(timeout)


def test_a_missing_output_before_the_limit_stays_an_error() -> None:
    # The runtime's own limit is 240 s: a missing result after 12.8 s is no timeout.
    events = _isolated_events(240)
    assert [e for e in events if e["type"] == "tool.timeout"] == []
    (finished,) = [e for e in events if e["type"] == "tool.finished"]
    assert (finished["status"], finished["error_code"]) == ("error", "missing_tool_output")
    assert finished["error_message"] == "No output found for tool 'workspace_jobs.export_report'"


def test_a_rejection_without_index_is_held_until_the_round_ends_without_a_decision() -> None:
    case = next(c for c in RECORDED["cases"] if c["id"] == "protocol-rejected-single")
    mapper = Mapper(POLICY_AGENTS)
    envelopes = [m["payload"]["data"] for m in case["published"]]
    rejection = next(e for e in envelopes if e["type"] == "react.tool.rejected")
    assert mapper.feed(rejection).events[-1]["type"] == "round.started"  # the rejection waits
    ending = {**rejection, "type": "chat.complete", "data": {}}
    events = mapper.feed(ending).events
    assert [e["type"] for e in events] == ["action.rejected", "round.finished"]
    assert events[0]["action_index"] is None


def test_the_early_call_id_is_the_slot_hash_of_its_index() -> None:
    early = [e for e in mapped() if e["type"] == "tool.early_started"]
    for event in early:
        assert event["tool_call_id"] == slot_call_id(
            event["turn_id"], event["iteration"], event["action_index"]
        )


def test_a_replayed_envelope_maps_to_the_same_event_ids() -> None:
    first = mapped()
    again = mapped()
    assert [e["event_id"] for e in first] == [e["event_id"] for e in again]
    assert len({e["event_id"] for e in first}) == len(first)


def test_rounds_end_with_the_next_round_or_the_turn() -> None:
    finished = Counter(
        (e["turn_id"], e["iteration"]) for e in mapped() if e["type"] == "round.finished"
    )
    rounds = {
        (c["input"]["round"]["turn_id"], c["input"]["round"]["iteration"])
        for c in RECORDED["cases"]
    }
    assert set(finished) == rounds
    assert set(finished.values()) == {1}


def test_agent_ids_fall_back_like_the_runtime_config_loader() -> None:
    agents = {"main", "writer_bot"}
    assert map_agent("writer.bot", agents) == "writer_bot"
    assert map_agent("helper.bot", agents) == "main"
    assert map_agent("helper.bot", {"other"}) == "helper.bot"
    assert map_agent("", set()) == "default.react.agent"
    events = mapped()
    assert {e["agent"] for e in events} == {"main"}  # helper.bot falls back to main


@pytest.mark.parametrize(
    ("channel", "payload", "reason"),
    [
        ("kdcube.relay.chatbot.acme:demo:kb.events.s", "{}", "not a chat events channel"),
        ("kdcube.relay.chatbot.acme:demo:chat.events.s", "{nope", "not JSON"),
        (
            "kdcube.relay.chatbot.acme:demo:chat.events.s",
            "[1]",
            "no envelope (data is not an object)",
        ),
        (
            "kdcube.relay.chatbot.acme:demo:chat.events.s",
            '{"data": {"type": "react.tool.call"}}',
            "no conversation",
        ),
    ],
)
def test_malformed_envelopes_are_skipped_with_a_reason(
    channel: str, payload: str, reason: str
) -> None:
    outcome = Mapper().feed_message(channel, payload)
    assert outcome.events == []
    assert outcome.skipped == reason


def test_a_tool_event_without_iteration_is_skipped_and_mapping_goes_on() -> None:
    mapper = Mapper(POLICY_AGENTS)
    _, channel, payload = next(m for m in messages() if m[2]["data"]["type"] == "react.tool.call")
    broken = json.loads(json.dumps(payload))
    del broken["data"]["data"]["iteration"]
    assert mapper.feed_message(channel, json.dumps(broken)).skipped == "no iteration"
    assert mapper.feed_message(channel, json.dumps(payload)).events


def test_only_an_inferred_event_may_leave_its_unknowable_fields_null() -> None:
    from observe.domain.events import EventError

    event = next(e for e in mapped() if e["type"] == "tool.early_started")
    assert parse_event(event).data["fingerprint"] is None
    with pytest.raises(EventError, match="fingerprint"):
        parse_event({k: v for k, v in event.items() if k != "inferred"})
    with pytest.raises(EventError, match="inferred must be true or false"):
        parse_event({**event, "inferred": "yes"})


def _hypothetical(kind: str, data: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    """An envelope of a proposed emit point (docs/kdcube-events.md), in the shape the runtime's
    ``service_event`` gives every envelope (copied from a recorded one): not published today."""
    env = json.loads(json.dumps(like))
    env["type"] = kind
    env["event"] = {"step": kind, "status": "completed", "agent": "react.overseer"}
    env["data"] = data
    return env


def test_the_proposed_emit_points_switch_the_bridge_to_exact_events() -> None:
    case = next(c for c in RECORDED["cases"] if c["id"] == "early-then-cap")
    envelopes = [m["payload"]["data"] for m in case["published"]]
    like = envelopes[0]
    turn, it = "turn-a", 1
    fingerprint = "a" * 64
    exact = [
        _hypothetical(
            "react.round.started",
            {"iteration": it, "max_actions": 2, "multi_action_mode": "on", "policy_hash": None},
            like,
        ),
        *[
            _hypothetical(
                "react.action.accepted",
                {"iteration": it, "action_index": i, "tool_id": t, "strategy": None},
                like,
            )
            for i, t in ((0, "workspace_jobs.launch_background_job"), (1, "workspace_jobs.search"))
        ],
        _hypothetical("react.generation.finished", {"iteration": it}, like),
    ]
    mapper = Mapper(POLICY_AGENTS)
    events: list[dict[str, Any]] = []
    for env in exact[:3]:
        events.extend(mapper.feed(env).events)
    for env in envelopes:
        if env["type"] == "react.tool.call" and env["data"]["tool_call_id"].startswith("tc_b"):
            env = json.loads(json.dumps(env))
            env["data"].update(action_index=0, early=True, fingerprint=fingerprint)
        events.extend(mapper.feed(env).events)
        if env["type"] == "react.tool.rejected":
            events.extend(mapper.feed(exact[3]).events)
    mine = [e for e in events if (e["turn_id"], e["iteration"]) == (turn, it)]
    for event in mine:
        parse_event(event)
    started = [e for e in mine if e["type"] == "round.started"]
    assert [(e["max_actions"], e.get("inferred")) for e in started] == [(2, None)]
    early = next(e for e in mine if e["type"] == "tool.early_started")
    assert early["fingerprint"] == fingerprint
    assert "inferred" not in early
    assert [e.get("inferred") for e in mine if e["type"] == "generation.finished"] == [None]
    # The overseer said what it accepted: no inferred action.observed/accepted any more.
    assert not [e for e in mine if e["type"].startswith("action.a") and e.get("inferred")]


def test_generation_finished_carries_the_code_channel_the_runtime_judged() -> None:
    """Issue 37 §5: where the decision's exec streamer published its deltas, the round's
    ``generation.finished`` says what the runtime's ``_exec_streamer_is_complete`` said (recorded
    with each case); a round without them says nothing (drift and impact predict both)."""
    finished = {
        (e["turn_id"], e["iteration"]): e for e in mapped() if e["type"] == "generation.finished"
    }
    exec_cases = [c for c in RECORDED["cases"] if "exec_code_complete" in c["input"]["round"]]
    assert {c["input"]["round"]["exec_code_complete"] for c in exec_cases} == {True, False}
    for case in RECORDED["cases"]:
        spec = case["input"]["round"]
        event = finished.get((spec["turn_id"], spec["iteration"]))
        if event is None:
            continue
        if "exec_code_complete" in spec:
            assert event["exec_code_complete"] is spec["exec_code_complete"], case["id"]
        else:
            assert "exec_code_complete" not in event, case["id"]


def test_a_runtimes_own_generation_finished_carries_its_code_channel() -> None:
    mapper = Mapper(POLICY_AGENTS)
    base = {
        "type": "react.generation.finished",
        "ts": 1796205243921,
        "service": {"agent_id": "main"},
        "conversation": {"turn_id": "t-exact"},
    }
    got = mapper.feed({**base, "data": {"iteration": 0, "exec_code_complete": False}}).events
    (finished,) = [e for e in got if e["type"] == "generation.finished"]
    assert finished["exec_code_complete"] is False
    assert "inferred" not in finished
    assert parse_event(finished).data["exec_code_complete"] is False


def test_the_mapping_imports_without_django() -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, kdcube.bridge.domain.mapping\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'ninja', 'channels', 'daphne'))))\n"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
