"""Which react agent a prediction assumes (issue 37 §0) and what v2 does with a round."""

from __future__ import annotations

from engine.round.dryrun import describe, dry_run, parse_round_spec
from engine.round.react_version import VersionSources, react_version, read_react_version
from engine.traits.round_policy import RoundPolicy

POLICY = RoundPolicy({"jobs.search": {"strategy": ["exploration"]}, "jobs.get": {}}, {})


def test_the_setting_is_read_as_the_runtime_reads_its_own() -> None:
    assert read_react_version(" V3 ") == ("v3", True)
    assert read_react_version("v4") == ("v2", False)
    assert read_react_version(None) == ("v2", True)


def test_the_round_beats_the_explicit_choice_beats_the_report_the_inference_and_the_setting() -> (
    None
):
    assert react_version(VersionSources("v3", "v2", "v2", "v2", "v2")) == (
        "v3",
        "the round's react_version",
    )
    assert react_version(VersionSources(None, None, "v3", "v2", "v2"))[1] == (
        "round.started's report"
    )
    assert react_version(VersionSources(None, None, None, "v3", "v2"))[1].startswith(
        "the bridge's inference"
    )
    assert react_version(VersionSources(setting="nonsense")) == (
        "v2",
        "the setting TRAITDECK_REACT_AGENT_VERSION",
    )
    assert react_version(VersionSources())[0] == "v2"


def _round(*attempts: list[dict[str, object]]) -> dict[str, object]:
    return {"turn_id": "t", "iteration": 0, "attempts": list(attempts)}


def test_under_v2_two_actions_run_nothing_and_the_model_is_asked_again() -> None:
    call = {"action": "call_tool", "tool_id": "jobs.search", "params": {}}
    other = {"action": "call_tool", "tool_id": "jobs.get", "params": {}}
    spec = parse_round_spec(_round([call, other], [other], [call]))
    result = dry_run(spec, POLICY, multi_action_mode="on", react_version="v2")
    first, second, third = result["attempts"]
    assert first["decision"]["route"] == "decision"
    assert [a["verdict"] for a in first["actions"]] == ["rejected", "rejected"]
    assert second["decision"] == {
        "route": "tool_execution",
        "schema": None,
        "channel_instances": None,
        "notices": [],
        "retries": 1,
        "runs": "jobs.get",
        "exit": None,
    }
    assert third["decision"] is None
    assert third["actions"][0]["verdict"] == "not_reached"
    assert describe(result)[-1].startswith("assumed react agent v2: the v2 agent takes one action")


def test_under_v2_an_unknown_tool_spends_both_retries_in_one_decision_then_the_turn_exits() -> None:
    ghost = {"action": "call_tool", "tool_id": "jobs.ghost", "params": {}}
    result = dry_run(parse_round_spec(_round([ghost], [ghost])), POLICY, react_version="v2")
    first, second = (a["decision"] for a in result["attempts"])
    assert (first["notices"], first["retries"]) == (["tool_call_invalid", "tool_signature_red"], 2)
    assert (second["route"], second["exit"]) == ("exit", "tool_call_invalid")
