"""observe.timeline: where the round page draws each lane and mark."""

from __future__ import annotations

from observe.timeline import Scale, axis_ticks, build_timeline
from tests.observe.live_support import CALL, EARLY_ROUND, FINGERPRINT, START, assembled, at


def test_the_scale_maps_the_span_onto_the_chart() -> None:
    scale = Scale(start=START, span_ms=4000, left=100, width=800)
    assert scale.x(START) == 100
    assert scale.x(at(1000)) == 300
    assert scale.x(at(4000)) == 900
    assert scale.x(at(9000)) == 900  # clamped to the chart
    assert scale.bar(at(1000), at(3000)) == (300, 400)
    assert scale.bar(at(1000), at(1000)) == (300, 2)  # never invisible


def test_axis_ticks_are_round_numbers_across_the_span() -> None:
    ticks = axis_ticks(Scale(start=START, span_ms=4000, left=0, width=400))
    assert [tick.label for tick in ticks] == [
        "0 s",
        "0.5 s",
        "1 s",
        "1.5 s",
        "2 s",
        "2.5 s",
        "3 s",
        "3.5 s",
        "4 s",
    ]
    assert [tick.x for tick in ticks][:3] == [0, 50, 100]


def test_the_timeline_has_a_generation_lane_and_one_lane_per_action() -> None:
    timeline = build_timeline(assembled(*EARLY_ROUND))
    kinds = [(lane.kind, lane.index) for lane in timeline.lanes]
    assert kinds == [("generation", None), ("action", 0), ("action", 1)]
    generation = timeline.lanes[0].marks[0]
    scale = Scale(start=START, span_ms=4000)
    assert (generation.x, generation.width) == scale.bar(START, at(2200))
    assert timeline.generation_ends == (scale.x(at(2200)),)


def test_an_early_call_is_a_bar_overlapping_generation() -> None:
    timeline = build_timeline(assembled(*EARLY_ROUND))
    early = timeline.lanes[1].marks[0]
    scale = Scale(start=START, span_ms=4000)
    assert early.kind == "early"
    assert (early.x, early.width) == scale.bar(at(1000), at(3000))
    assert early.x < timeline.generation_ends[0] < early.x + early.width


def test_a_rejection_is_a_point_with_its_reason() -> None:
    timeline = build_timeline(assembled(*EARLY_ROUND))
    (rejected,) = timeline.lanes[2].marks
    assert rejected.kind == "rejected"
    assert rejected.is_point
    assert rejected.x == Scale(start=START, span_ms=4000).x(at(1500))
    assert rejected.title.startswith("rejected: ")
    assert "not a supported action" in rejected.title or "call_tool" in rejected.title


def test_a_timeout_mark_names_the_limit_and_the_alternative() -> None:
    timeline = build_timeline(
        assembled(
            (0, "round.started", {"max_actions": 2}),
            (100, "generation.finished", {}),
            (200, "tool.started", CALL),
            (
                2212,
                "tool.timeout",
                {**CALL, "limit_ms": 2000, "elapsed_ms": 2012, "async_alternative": "jobs.launch"},
            ),
        )
    )
    marks = {mark.kind: mark for mark in timeline.lanes[1].marks}
    assert marks["exec"].width > 0
    assert marks["timeout"].title == "timeout after 2.012 s, limit 2 s; try jobs.launch"


def test_a_dedup_is_a_point_naming_the_reused_call() -> None:
    timeline = build_timeline(
        assembled(
            (0, "round.started", {"max_actions": 2}),
            (
                300,
                "ledger.dedup",
                {
                    **CALL,
                    "original_action_index": 1,
                    "match": "fingerprint",
                    "fingerprint": FINGERPRINT,
                },
            ),
        )
    )
    (dedup,) = timeline.lanes[1].marks
    assert dedup.kind == "dedup"
    assert "reused tc_5ca55cec48db (matched by fingerprint" in dedup.title


def test_axis_labels_never_repeat_with_fine_steps() -> None:
    ticks = axis_ticks(Scale(start=START, span_ms=500, left=0, width=500))
    labels = [tick.label for tick in ticks]
    assert labels[:3] == ["0 s", "0.05 s", "0.1 s"]
    assert len(set(labels)) == len(labels)


def test_a_dropped_stream_ends_its_generation_lane_at_its_last_streamed_action() -> None:
    observed = {"action_index": 0, "action": "call_tool", "tool_id": "react.read", "params": {}}
    timeline = build_timeline(
        assembled(
            (0, "round.started", {"max_actions": 2}),
            (400, "action.observed", observed),
            (800, "action.accepted", {"action_index": 0, "tool_id": "react.read"}),
            (1500, "action.observed", {**observed, "attempt": 1}),
            (2000, "generation.finished", {"attempt": 1}),
            (4000, "round.finished", {"outcome": "ok"}),
        )
    )
    dropped, _, retried, _ = timeline.lanes
    scale = Scale(start=START, span_ms=4000)
    assert dropped.unfinished
    assert (dropped.marks[0].x, dropped.marks[0].width) == scale.bar(START, at(800))
    assert not retried.unfinished
    assert (retried.marks[0].x, retried.marks[0].width) == scale.bar(at(1500), at(2000))
    assert [lane.label for lane in timeline.lanes] == [
        "generation (attempt 1)",
        "1·#0 react.read",
        "generation (attempt 2)",
        "2·#0 react.read",
    ]


def test_zooming_to_a_range_keeps_only_what_happens_in_it() -> None:
    whole = build_timeline(assembled(*EARLY_ROUND))
    assert not whole.zoomed
    assert whole.window_s == ("0", "4", "4")
    # 2.5 s to 4 s: after the rejection (1.5 s) and generation.finished (2.2 s).
    zoomed = build_timeline(assembled(*EARLY_ROUND), (2500, 4000))
    assert zoomed.zoomed
    assert zoomed.window_s == ("2.5", "4", "4")
    assert zoomed.ticks[0].label == "2.5 s"
    assert zoomed.generation_ends == ()
    assert zoomed.lanes[0].marks == ()  # generation ended before the window
    assert zoomed.lanes[2].marks == ()  # the rejection too
    early = zoomed.lanes[1].marks[0]  # the early call runs until 3 s: its end is in view
    scale = Scale(start=at(2500), span_ms=1500, offset_ms=2500)
    assert (early.x, early.width) == scale.bar(at(1000), at(3000))
    # A window past the end is brought back inside the round.
    assert build_timeline(assembled(*EARLY_ROUND), (9000, 12000)).window_s[1] == "4.001"
