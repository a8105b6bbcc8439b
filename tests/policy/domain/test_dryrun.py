from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from policy.domain.dryrun import RoundSpecError, describe, dry_run, parse_round_spec
from policy.domain.ledger import fingerprint
from policy.domain.overseer import Action
from policy.domain.traits import EARLY_PROFILE

TRAITS: dict[str, Mapping[str, Any]] = {
    "react.delegate": {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)},
    "workspace_jobs.search": {"strategy": ["exploration"]},
    "react.write": {"strategy": ["exploitation"]},
}


def resolve(tool_id: str, params: Any) -> Mapping[str, Any] | None:
    return TRAITS.get(tool_id)


DELEGATE = {
    "action": "call_tool",
    "tool_id": "react.delegate",
    "params": {"charter": "A", "agent_alias": "strong_agent"},
}
# The provider retry sends the same call with its keys in another order.
DELEGATE_REORDERED = {
    "action": "call_tool",
    "tool_id": "react.delegate",
    "params": {"agent_alias": "strong_agent", "charter": "A"},
}
SEARCH = {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {"q": "x"}}
FINGERPRINT = "40b78e51de2d48e9f19370949ed7eafe6594198e5a75bc7896e0cd02e0a4681f"


def run(data: Any) -> dict[str, Any]:
    return dry_run(parse_round_spec(data), resolve)


def test_it_dedups_a_reordered_retry_by_fingerprint() -> None:
    result = run(
        {
            "turn_id": "turn-1",
            "iteration": 2,
            "attempts": [[DELEGATE, SEARCH], [SEARCH, DELEGATE_REORDERED]],
        }
    )
    first, second = (attempt["actions"] for attempt in result["attempts"])
    assert first[0] == {
        "index": 0,
        "action": "call_tool",
        "tool_id": "react.delegate",
        "strategy": ["neutral"],
        "verdict": "accepted",
        "early": True,
        "explanation": "accepted",
        "tool_call_id": "tc_5ca55cec48db",
        "fingerprint": FINGERPRINT,
        "ledger": "started",
    }
    assert first[1]["early"] is False
    assert "ledger" not in first[1]
    assert second[1] == {
        "index": 1,
        "action": "call_tool",
        "tool_id": "react.delegate",
        "strategy": ["neutral"],
        "verdict": "accepted",
        "early": True,
        "explanation": "accepted",
        "tool_call_id": "tc_5ca55cec48db",
        "fingerprint": FINGERPRINT,
        "ledger": "dedup",
        "match": "fingerprint",
    }


def test_it_dedups_a_retry_at_the_same_index_by_slot() -> None:
    changed = {**DELEGATE, "params": {"charter": "B"}}
    result = run(
        {
            "turn_id": "turn-1",
            "iteration": 2,
            "attempts": [[DELEGATE, {"action": "complete"}], [changed]],
        }
    )
    retry = result["attempts"][1]["actions"][0]
    # The slot wins whatever it holds: the changed call is not started again.
    assert retry["ledger"] == "dedup"
    assert retry["match"] == "slot"
    assert retry["tool_call_id"] == "tc_5ca55cec48db"
    assert retry["fingerprint"] == fingerprint("react.delegate", {"charter": "B"})


def test_it_reports_rejections_with_code_extra_and_explanation() -> None:
    result = run(
        {
            "turn_id": "t",
            "iteration": 0,
            "actions": [SEARCH, {"action": "call_tool", "tool_id": "react.write", "params": {}}],
        }
    )
    rejected = result["attempts"][0]["actions"][1]
    assert rejected["verdict"] == "rejected"
    assert rejected["code"] == "multi_action_bundle_strategy_incompatible"
    assert rejected["extra"] == {
        "strategy": ["exploitation"],
        "first_index": 0,
        "first_tool_id": "workspace_jobs.search",
        "first_strategy": ["exploration"],
    }
    assert rejected["explanation"].startswith("workspace_jobs.search (exploration) was accepted")
    accepted = result["attempts"][0]["actions"][0]
    assert "code" not in accepted
    assert "extra" not in accepted


def test_it_names_no_tool_for_final_answers_and_unknown_for_unsupported_actions() -> None:
    result = run(
        {
            "turn_id": "t",
            "iteration": 0,
            "actions": [{"action": "think", "tool_id": "x.y"}, {"action": "exit", "tool_id": "z"}],
        }
    )
    think, final = result["attempts"][0]["actions"]
    assert (think["tool_id"], think["strategy"], think["extra"]) == ("x.y", ["unknown"], None)
    assert (final["tool_id"], final["strategy"], final["verdict"]) == (
        None,
        ["exploitation"],
        "accepted",
    )


def test_it_reports_the_effective_cap() -> None:
    actions = [SEARCH, SEARCH, SEARCH]
    assert run({"turn_id": "t", "iteration": 0, "actions": actions})["max_actions"] == 2
    declared = run({"turn_id": "t", "iteration": 0, "max_actions": 3, "actions": actions})
    assert declared["max_actions"] == 3
    assert [a["verdict"] for a in declared["attempts"][0]["actions"]] == ["accepted"] * 3
    zero = run({"turn_id": "t", "iteration": 0, "max_actions": 0, "actions": actions})
    assert zero["max_actions"] == 2


def test_it_keeps_a_call_without_params_off_the_early_path() -> None:
    bare = {"action": "call_tool", "tool_id": "react.delegate"}
    entry = run({"turn_id": "t", "iteration": 0, "actions": [bare]})["attempts"][0]["actions"][0]
    assert entry["verdict"] == "accepted"
    assert entry["early"] is False
    assert "tool_call_id" not in entry


def test_it_produces_json_serializable_output() -> None:
    result = run({"turn_id": "t", "iteration": 1, "attempts": [[DELEGATE, SEARCH, SEARCH]]})
    assert json.loads(json.dumps(result)) == result


def test_it_describes_each_action_in_plain_words() -> None:
    result = run(
        {
            "turn_id": "turn-1",
            "iteration": 2,
            "attempts": [
                [DELEGATE, SEARCH, {"action": "call_tool", "tool_id": "react.write"}],
                [SEARCH, DELEGATE_REORDERED],
                [],
            ],
        }
    )
    lines = describe(result)
    assert lines[0] == (
        "attempt 1 #0 call_tool react.delegate [neutral]: accepted, starts early as tc_5ca55cec48db"
    )
    assert lines[1] == "attempt 1 #1 call_tool workspace_jobs.search [exploration]: accepted"
    assert lines[2].startswith(
        "attempt 1 #2 call_tool react.write [exploitation]: rejected "
        "(multi_action_bundle_too_many_actions): the round allows at most 2 actions"
    )
    assert lines[4] == (
        "attempt 2 #1 call_tool react.delegate [neutral]: accepted, dedup: reuses "
        "tc_5ca55cec48db (matched by fingerprint)"
    )
    assert lines[5] == "attempt 3: no actions"


def test_it_parses_a_single_actions_list_as_one_attempt() -> None:
    spec = parse_round_spec(
        {"turn_id": " turn-1 ", "iteration": 0, "actions": [DELEGATE, {"action": "complete"}]}
    )
    assert spec.turn_id == "turn-1"
    assert spec.attempts == (
        (
            Action("call_tool", "react.delegate", DELEGATE["params"], True),
            Action("complete", None, None, False),
        ),
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "the round must be a JSON object"),
        ({"iteration": 0, "actions": []}, "turn_id"),
        ({"turn_id": "  ", "iteration": 0, "actions": []}, "turn_id"),
        ({"turn_id": 7, "iteration": 0, "actions": []}, "turn_id"),
        ({"turn_id": "t", "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": -1, "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": True, "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": 1.5, "actions": []}, "iteration"),
        ({"turn_id": "t", "iteration": 0}, "attempts"),
        ({"turn_id": "t", "iteration": 0, "actions": [], "attempts": [[]]}, "not both"),
        ({"turn_id": "t", "iteration": 0, "attempts": {}}, "attempts"),
        ({"turn_id": "t", "iteration": 0, "attempts": []}, "attempts"),
        ({"turn_id": "t", "iteration": 0, "attempts": [[], "x"]}, "attempts[1]"),
        ({"turn_id": "t", "iteration": 0, "actions": {"action": "complete"}}, "actions"),
        ({"turn_id": "t", "iteration": 0, "actions": ["complete"]}, "actions[0]"),
        ({"turn_id": "t", "iteration": 0, "actions": [{"tool_id": "x"}]}, "actions[0].action"),
        ({"turn_id": "t", "iteration": 0, "actions": [{"action": 5}]}, "actions[0].action"),
        (
            {"turn_id": "t", "iteration": 0, "attempts": [[{"action": "call_tool", "tool_id": 3}]]},
            "attempts[0][0].tool_id",
        ),
        ({"turn_id": "t", "iteration": 0, "max_actions": "2", "actions": []}, "max_actions"),
        ({"turn_id": "t", "iteration": 0, "max_actions": False, "actions": []}, "max_actions"),
    ],
)
def test_it_refuses_a_malformed_round_naming_the_field(data: Any, field: str) -> None:
    with pytest.raises(RoundSpecError) as error:
        parse_round_spec(data)
    message = str(error.value)
    assert field in message
    assert "\n" not in message
