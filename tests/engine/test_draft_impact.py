"""Replaying recorded rounds under two policies (issue 13): the engine-level properties of an
impact report, and ``traitdeck replay``."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from engine.catalog.multi_action import ModeSources, multi_action_mode
from engine.replay.draft_impact import (
    CHANGE_KINDS,
    DEDUP_GAINED,
    DEDUP_LOST,
    EARLY_GAINED,
    EARLY_LOST,
    NEWLY_DROPPED,
    NEWLY_REJECTED,
    NO_LONGER_DROPPED,
    NO_LONGER_REJECTED,
    OTHER_RULE,
    RISK_ORDER,
    RISKY_KINDS,
    RecordedRound,
    changes,
    outcomes,
    parse_recorded_round,
    predict,
    replay,
)
from engine.round.decide import decide_v2, outcomes_by_slot
from engine.round.dryrun import RoundSpec, dry_run
from engine.tools.resolution import AgentResolution, resolve_consumer
from engine.traits.round_policy import RoundPolicy
from policy.cli import run
from policy.domain.yaml_io import load_policy
from simulator.scenarios import Palette, pick_scenario, plan_round

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = (ROOT / "policy" / "sample" / "sample-policy.yaml").read_text(encoding="utf-8")
#: The sample with export_report turned from exploitation to exploration: it may now follow a
#: search in the same round.
EXPORT_EXPLORES = SAMPLE.replace(
    "export_report:\n                strategy: [exploitation]",
    "export_report:\n                strategy: [exploration]",
    1,
)
#: The sample with launch_background_job no longer neutral: it loses its early start.
LAUNCH_EXPLORES = SAMPLE.replace(
    "launch_background_job:\n                strategy: [neutral]",
    "launch_background_job:\n                strategy: [exploration]",
    1,
)
INVERSE = {
    NEWLY_REJECTED: NO_LONGER_REJECTED,
    NO_LONGER_REJECTED: NEWLY_REJECTED,
    OTHER_RULE: OTHER_RULE,
    NEWLY_DROPPED: NO_LONGER_DROPPED,
    NO_LONGER_DROPPED: NEWLY_DROPPED,
    EARLY_GAINED: EARLY_LOST,
    EARLY_LOST: EARLY_GAINED,
    DEDUP_GAINED: DEDUP_LOST,
    DEDUP_LOST: DEDUP_GAINED,
}


def resolution(text: str, agent: str = "main") -> AgentResolution:
    loaded = load_policy(text)
    assert not loaded.refused
    return resolve_consumer(loaded.data, agent)


def recorded_rounds(count: int, seed: int = 7) -> list[RecordedRound]:
    """Rounds the simulator's scenarios would stream for the sample's agent (retries re-stream)."""
    palette = Palette.of(resolution(SAMPLE))
    rng = random.Random(seed)
    rounds = []
    for number in range(count):
        plan = plan_round(palette, pick_scenario(rng), rng)
        attempts = [plan.actions]
        if plan.retry_order is not None:
            attempts.append(tuple(plan.actions[i] for i in plan.retry_order))
        spec = RoundSpec(f"t-{number}", 0, rng.choice((None, 2, 3)), tuple(attempts))
        rounds.append(RecordedRound("main", spec))
    return rounds


ROUNDS = recorded_rounds(400)


def sides(before: str, after: str) -> dict[str, Any]:
    a, b = resolution(before), resolution(after)
    return {"baseline": lambda agent: a, "candidate": lambda agent: b}


def test_the_same_policy_changes_no_round() -> None:
    report = replay(ROUNDS, **sides(SAMPLE, SAMPLE))
    assert report.rounds == len(ROUNDS)
    assert report.affected == []


@pytest.mark.parametrize("candidate", [EXPORT_EXPLORES, LAUNCH_EXPLORES])
def test_a_round_is_affected_exactly_when_its_two_predictions_differ(candidate: str) -> None:
    old, new = resolution(SAMPLE), resolution(candidate)
    report = replay(ROUNDS, **sides(SAMPLE, candidate))
    affected = {impact.turn_id for impact in report.affected}
    assert affected, "the change should alter some of 400 simulated rounds"
    for recorded in ROUNDS:
        spec = recorded.spec
        before = outcomes(dry_run(spec, old, multi_action_mode="off"))
        after = outcomes(dry_run(spec, new, multi_action_mode="off"))
        assert (before != after) == (spec.turn_id in affected), spec.turn_id


def test_swapping_the_sides_inverts_every_change() -> None:
    forward = replay(ROUNDS, **sides(SAMPLE, LAUNCH_EXPLORES))
    backward = replay(ROUNDS, **sides(LAUNCH_EXPLORES, SAMPLE))
    assert [r.turn_id for r in forward.affected] == [r.turn_id for r in backward.affected]
    for there, back in zip(forward.affected, backward.affected, strict=True):
        assert [(c.attempt, c.index, INVERSE[c.kind]) for c in there.changes] == [
            (c.attempt, c.index, c.kind) for c in back.changes
        ]


def test_losing_neutral_loses_the_early_starts_and_their_dedups() -> None:
    report = replay(ROUNDS, **sides(SAMPLE, LAUNCH_EXPLORES))
    assert report.totals[EARLY_LOST] > 0
    assert report.totals[EARLY_GAINED] == 0
    assert set(report.per_tool) >= {"workspace_jobs.launch_background_job"}
    for impact in report.affected:
        for change in impact.changes:
            if change.kind == EARLY_LOST:
                assert change.tool_id == "workspace_jobs.launch_background_job"
                assert change.before.early
                assert not change.after.early


def test_an_exploration_export_is_no_longer_rejected_after_a_search() -> None:
    actions = [
        {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {"q": "x"}},
        {"action": "call_tool", "tool_id": "workspace_jobs.export_report", "params": {"p": 1}},
    ]
    recorded = parse_recorded_round(
        {
            "agent": "main",
            "turn_id": "t",
            "iteration": 0,
            "max_actions": 3,
            "actions": actions,
            "multi_action_mode": "on",
        }
    )
    report = replay([recorded], **sides(SAMPLE, EXPORT_EXPLORES))
    [impact] = report.affected
    [change] = impact.changes
    assert (change.kind, change.attempt, change.index) == (NO_LONGER_REJECTED, 1, 1)
    assert change.rule == "multi_action_bundle_strategy_incompatible"
    assert report.summary() == "1 of 1 rounds change: 1 no longer rejected"


def test_the_round_s_recorded_mode_wins_over_either_side_s() -> None:
    """A mode difference between the sides is never reported for a round that recorded its own
    mode (DESIGN §2.10 item 6: the round's mode decides)."""
    pinned = [
        RecordedRound(r.agent, RoundSpec(r.spec.turn_id, 0, 3, r.spec.attempts, "on"))
        for r in ROUNDS
    ]
    both = sides(SAMPLE, SAMPLE)
    off, on = ModeSources(setting="off"), ModeSources(setting="on")
    report = replay(pinned, **both, baseline_mode=lambda a: off, candidate_mode=lambda a: on)
    assert report.affected == []
    unpinned = replay(ROUNDS, **both, baseline_mode=lambda a: off, candidate_mode=lambda a: on)
    # Without a recorded mode each side's applies: with it on, siblings of the first action run.
    assert unpinned.totals[NO_LONGER_DROPPED] > 0
    assert multi_action_mode(pinned[0].spec.multi_action_mode, off) == "on"


def test_progress_is_reported_and_can_cancel() -> None:
    seen: list[int] = []

    def progress(done: int) -> None:
        seen.append(done)
        if done == 200:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replay(ROUNDS, **sides(SAMPLE, SAMPLE), progress=progress, every=100)
    assert seen == [100, 200]


def test_changes_of_identical_results_are_none() -> None:
    result = dry_run(ROUNDS[0].spec, resolution(SAMPLE))
    assert changes(result, result) == ()


def test_predict_counts_what_one_policy_does() -> None:
    sample = resolution(SAMPLE)
    totals = predict(ROUNDS, policy=lambda agent: sample)
    assert totals["rounds"] == len(ROUNDS)
    expected_rejections = sum(
        o.rejected
        for r in ROUNDS
        for _, o in outcomes(dry_run(r.spec, sample, multi_action_mode="off")).values()
    )
    assert sum(totals["rejected"].values()) == expected_rejections > 0


# --- traitdeck replay -----------------------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "old.yaml").write_text(SAMPLE, encoding="utf-8")
    (tmp_path / "new.yaml").write_text(LAUNCH_EXPLORES, encoding="utf-8")
    lines = []
    for recorded in ROUNDS[:100]:
        spec = recorded.spec
        lines.append(
            json.dumps(
                {
                    "agent": recorded.agent,
                    "turn_id": spec.turn_id,
                    "iteration": spec.iteration,
                    "max_actions": spec.max_actions,
                    "attempts": [
                        [
                            {"action": a.action, "tool_id": a.tool_id, "params": a.params}
                            for a in attempt
                        ]
                        for attempt in spec.attempts
                    ],
                }
            )
        )
    (tmp_path / "rounds.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {name: str(tmp_path / name) for name in ("old.yaml", "new.yaml", "rounds.jsonl")}


def test_the_cli_reports_the_same_impact_as_the_engine(files: dict[str, str]) -> None:
    code, out, err = cli(
        "replay", files["new.yaml"], "--rounds", files["rounds.jsonl"],
        "--against", files["old.yaml"], "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    engine = replay(ROUNDS[:100], **sides(SAMPLE, LAUNCH_EXPLORES))
    assert data["rounds"] == 100
    assert data["affected_rounds"] == len(engine.affected) > 0
    assert data["totals"][EARLY_LOST] == engine.totals[EARLY_LOST]
    code, text, _ = cli(
        "replay", files["new.yaml"], "--rounds", files["rounds.jsonl"],
        "--against", files["old.yaml"],
    )  # fmt: skip
    assert text.splitlines()[0] == engine.summary()
    assert "tool workspace_jobs.launch_background_job:" in text


def test_the_cli_without_a_baseline_prints_the_prediction(files: dict[str, str]) -> None:
    code, out, _ = cli("replay", files["old.yaml"], "--rounds", files["rounds.jsonl"])
    assert code == 0
    assert out.startswith("100 rounds, ")
    assert "early starts" in out


def test_decide_v2_gives_the_v2_dry_run_s_outcomes() -> None:
    """The verdicts-only path under v2 is the dry-run's v2 rows, round for round."""
    sample = resolution(SAMPLE)
    policy = RoundPolicy.of(sample.tools)
    for recorded in ROUNDS:
        spec = recorded.spec
        got = outcomes_by_slot(spec, decide_v2(spec, policy))
        assert got == outcomes(dry_run(spec, sample, react_version="v2")), spec.turn_id


def test_replay_and_predict_run_under_the_react_version_they_are_given() -> None:
    """v2 starts nothing early, so a policy that loses launch_background_job's early starts
    under v3 changes no early start under v2; the report says which agent it assumed."""
    v3 = replay(ROUNDS, **sides(SAMPLE, LAUNCH_EXPLORES))
    v2 = replay(ROUNDS, **sides(SAMPLE, LAUNCH_EXPLORES), react_version="v2")
    assert v3.totals[EARLY_LOST] > 0
    assert v2.totals[EARLY_LOST] == 0
    assert v2.as_json()["react_version"] == "v2"
    assert v2.as_json()["rounds_by_react_version"] == {"v2": len(ROUNDS)}
    totals = predict(ROUNDS, policy=lambda agent: resolution(SAMPLE), react_version="v2")
    assert totals["early_starts"] == totals["dedups"] == 0
    assert totals["rejected"].get("action_schema_error", 0) > 0
    assert totals["react_version"] == "v2"


def test_the_cli_replay_says_which_react_agent_it_assumed(
    files: dict[str, str], tmp_path: Path
) -> None:
    code, out, _ = cli(
        "replay", files["old.yaml"], "--rounds", files["rounds.jsonl"], "--react-version", "v2",
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert (data["react_version"], data["react_version_source"]) == ("v2", "the explicit choice")
    assert data["early_starts"] == 0
    code, text, _ = cli("replay", files["old.yaml"], "--rounds", files["rounds.jsonl"])
    assert text.splitlines()[1] == (
        "react agent assumed: v3 (from the setting TRAITDECK_REACT_AGENT_VERSION); a round's own "
        "react_version wins"
    )
    # A round's own react_version wins over the command's.
    own = tmp_path / "own.jsonl"
    first = json.loads(Path(files["rounds.jsonl"]).read_text().splitlines()[0])
    own.write_text(json.dumps({**first, "react_version": "v2"}) + "\n", encoding="utf-8")
    code, out, _ = cli(
        "replay", files["new.yaml"], "--rounds", str(own), "--against", files["old.yaml"],
        "--react-version", "v3", "--format", "json",
    )  # fmt: skip
    assert json.loads(out)["rounds_by_react_version"] == {"v2": 1}


def test_a_malformed_line_is_a_usage_error_naming_it(files: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(Path(files["rounds.jsonl"]).read_text().splitlines()[0] + "\n{nope\n")
    code, out, err = cli("replay", files["old.yaml"], "--rounds", str(bad))
    assert code == 2
    assert out == ""
    assert f"{bad}:2: not a recorded round" in err


def test_early_starts_of_tools_that_do_more_than_read_come_first() -> None:
    from engine.replay.draft_impact import EARLY_GAINED, ActionChange, RoundImpact, impact_groups
    from engine.round.decide import Outcome

    def gained(turn: str, tool: str) -> RoundImpact:
        before, after = (
            Outcome("accepted", None, False, False),
            Outcome("accepted", None, True, False),
        )
        change = ActionChange(EARLY_GAINED, 1, 0, tool, before, after)
        return RoundImpact("main", turn, 0, (change,))

    affected = [
        gained("t1", "jobs.search"),
        gained("t2", "jobs.export"),
        gained("t3", "jobs.lookup"),
    ]
    reads = {"jobs.search", "jobs.lookup"}
    (group,) = impact_groups(affected, reads_only=lambda agent, tool: tool in reads)
    assert [change.tool_id for _, change in group.items] == [
        "jobs.export",
        "jobs.search",
        "jobs.lookup",
    ]
    (unsorted,) = impact_groups(affected)
    assert [change.tool_id for _, change in unsorted.items][0] == "jobs.search"


def test_the_risk_order_ranks_every_change_kind_once_and_the_risky_ones_first() -> None:
    names = [kind.name for kind in CHANGE_KINDS]
    assert sorted(RISK_ORDER) == sorted(names)
    assert len(set(names)) == len(names)
    # The impact page lists groups in this order: a change that lets something run comes first.
    assert set(RISK_ORDER[: len(RISKY_KINDS)]) == RISKY_KINDS
    assert {NO_LONGER_REJECTED, NO_LONGER_DROPPED, DEDUP_LOST, EARLY_GAINED} == RISKY_KINDS


def test_every_change_kind_is_worded_and_explained() -> None:
    labels = [kind.label for kind in CHANGE_KINDS]
    assert len(set(labels)) == len(labels)
    assert all(kind.label and kind.explained for kind in CHANGE_KINDS)
    rejection = {kind.name for kind in CHANGE_KINDS if kind.by_rule}
    assert rejection == {NEWLY_REJECTED, NO_LONGER_REJECTED, OTHER_RULE}


def test_a_round_that_does_not_say_its_code_channel_is_replayed_both_ways() -> None:
    """Issue 37 §5: recorded events do not carry ``exec_code_complete``. The candidate makes a
    renderer exploitation after an exploration read (rejected online). With the code channel
    incomplete the code-execution call is unsafe and the render was accepted (newly rejected);
    complete, the call stays and owns the file, so the render was a same-file collision (another
    rule). Both are predicted, both changes reported; a round that says its channel gets one."""

    def policy(strategy: str) -> Any:
        tools = [
            {
                "kind": "python",
                "module": "exec_tools",
                "alias": "exec_tools",
                "allowed": ["execute_code_python"],
                "tool_traits": {"execute_code_python": {"strategy": ["neutral"]}},
            },
            {
                "kind": "python",
                "module": "rendering_tools",
                "alias": "rendering_tools",
                "allowed": ["write_pdf"],
                "tool_traits": {"write_pdf": {"strategy": [strategy]}},
            },
        ]
        resolution = resolve_consumer(
            {"surfaces": {"as_consumer": {"agents": {"main": {"tools": tools}}}}}, "main"
        )
        return lambda agent: resolution

    actions = [
        {"action": "call_tool", "tool_id": "react.read", "params": {"paths": ["x.md"]}},
        {
            "action": "call_tool",
            "tool_id": "exec_tools.execute_code_python",
            "params": {"contract": [{"name": "a", "filename": "a.md"}]},
        },
        {
            "action": "call_tool",
            "tool_id": "rendering_tools.write_pdf",
            "params": {"path": "a.md", "content": "# x"},
        },
    ]
    data = {"agent": "main", "turn_id": "t", "iteration": 0, "max_actions": 3, "actions": actions}
    on = ModeSources(setting="on")
    both = {"baseline": policy("neutral"), "candidate": policy("exploitation")}
    modes = {"baseline_mode": lambda a: on, "candidate_mode": lambda a: on}
    report = replay([parse_recorded_round(data)], **both, **modes)
    [impact] = report.affected
    assert {(c.index, c.kind) for c in impact.changes} == {(2, NEWLY_REJECTED), (2, OTHER_RULE)}
    said = parse_recorded_round({**data, "exec_code_complete": True})
    [impact] = replay([said], **both, **modes).affected
    assert {(c.index, c.kind) for c in impact.changes} == {(2, OTHER_RULE)}
