"""What Traitdeck writes into KDCube bundle props, held to what KDCube's own code did when
recorded (``tests/conformance/fixtures/kdcube-props.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kdcube.domain import props as kdcube_props
from kdcube.domain.props import PushRefused, Target

FIXTURE = Path(__file__).resolve().parents[2] / "conformance" / "fixtures" / "kdcube-props.json"
CASES: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["cases"]
BY_ID = {case["id"]: case for case in CASES}
POSTS = [c for c in CASES if c["request"]["method"] == "POST" and c["response"]["status"] == 200]


def _target(case_id: str) -> Target:
    body = BY_ID[case_id]["response"]["json"]
    return Target(props=body["props"], defaults=body["defaults"])


@pytest.mark.parametrize(
    "case", [c for c in POSTS if c["request"]["json"]["op"] == "merge"], ids=lambda c: c["id"]
)
def test_it_merges_as_kdcube_merged_every_recorded_write(case: dict[str, Any]) -> None:
    before = CASES[CASES.index(case) - 1]
    while before["stored"] is None:
        before = CASES[CASES.index(before) - 1]
    merged = kdcube_props.deep_merge(before["stored"], case["request"]["json"]["props"])
    # KDCube merges into the props as its descriptor store loads them, references resolved:
    # compare with the secret references of the stored props masked.
    secrets = kdcube_props.secret_paths(before["stored"])
    assert kdcube_props.masked(merged, secrets) == kdcube_props.masked(case["stored"], secrets)


def test_the_recording_shows_a_later_kdcube_write_stores_a_pushed_reference_resolved() -> None:
    key = ("surfaces", "as_consumer", "mcp", "services", "mcpServers", "knowledge", "headers")
    pushed, later = BY_ID["push-write"]["stored"], BY_ID["admin-changes-a-trait"]["stored"]
    for k in key:
        pushed, later = pushed[k], later[k]
    assert pushed["X-Api-Key"] == "env:TD_REC_KNOWLEDGE_KEY"
    assert later["X-Api-Key"] == "resolved-knowledge-secret"


def test_the_recording_shows_a_null_agent_loads_as_an_absent_one() -> None:
    # Why a removal is sent as ``null``: the runtime's loader gives an agent set to null what
    # it gives an agent the props never named (the default agent's tools).
    absent = BY_ID["push-read"]["loader"]["helper"]
    nulled = BY_ID["merge-agent-null"]["loader"]["helper"]
    assert (
        nulled["allowed_tool_names_by_alias"]
        == BY_ID["merge-agent-null"]["loader"]["main"]["allowed_tool_names_by_alias"]
    )
    assert set(nulled["allowed_tool_names_by_alias"]) <= set(absent["allowed_tool_names_by_alias"])
    assert (
        BY_ID["merge-agent-null"]["stored"]["surfaces"]["as_consumer"]["agents"]["helper"] is None
    )


def test_the_recording_shows_a_merge_keeps_an_agent_it_leaves_out() -> None:
    stored = BY_ID["merge-leaving-out-an-agent-keeps-it"]["stored"]
    assert "helper" in stored["surfaces"]["as_consumer"]["agents"]


def test_the_recording_shows_a_tool_left_out_of_the_list_is_gone() -> None:
    loaded = BY_ID["merge-list-without-a-tool"]["loader"]["main"]["allowed_tool_names_by_alias"]
    assert "gmail" not in loaded
    assert "gmail" in BY_ID["merge-agent-null"]["loader"]["main"]["allowed_tool_names_by_alias"]


def test_the_recording_shows_get_returns_secrets_resolved_and_replace_stores_them() -> None:
    read = BY_ID["replace-read"]["response"]["json"]["props"]
    assert read["telemetry_sink"]["token"] == "resolved-telemetry-secret"
    stored = BY_ID["replace-with-what-get-returned"]["stored"]
    assert stored["telemetry_sink"]["token"] == "resolved-telemetry-secret"


def test_the_recording_shows_file_authority_drops_the_descriptor_comments() -> None:
    assert BY_ID["push-read"]["descriptor_comment_kept"] is True
    assert BY_ID["push-write"]["descriptor_comment_kept"] is False


def test_it_pushes_only_the_owned_subtree_with_removals_as_null() -> None:
    version = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}}
    target = Target(
        props={
            "telemetry_sink": {"token": "resolved"},
            "surfaces": {
                "as_consumer": {
                    "agents": {"main": {"tools": [{"name": "a"}]}, "old": {"tools": []}},
                    "mcp": {"services": {}},
                }
            },
        },
        defaults={},
    )
    assert kdcube_props.push_patch(target, version) == {
        "surfaces": {"as_consumer": {"agents": {"main": {"tools": []}, "old": None}, "mcp": None}}
    }


def test_it_makes_the_runtime_load_exactly_the_version_after_the_recorded_push() -> None:
    back = BY_ID["push-read-back"]
    version = back["traitdeck"]["version"]
    assert kdcube_props.differs(_target("push-read-back"), version) == []
    assert kdcube_props.differs(_target("push-read"), version) == ["agents.main"]


def test_it_compares_a_secret_reference_as_secret_on_both_sides() -> None:
    # KDCube answers the resolved value where the version holds ``env:…``: not a difference.
    mcp = BY_ID["push-read-back"]["response"]["json"]["props"]["surfaces"]["as_consumer"]["mcp"]
    assert mcp["services"]["mcpServers"]["knowledge"]["headers"]["X-Api-Key"] == (
        "resolved-knowledge-secret"
    )
    assert (
        kdcube_props.differs(
            _target("push-read-back"), BY_ID["push-read-back"]["traitdeck"]["version"]
        )
        == []
    )


def test_it_sees_the_trait_an_admin_changed_in_kdcube() -> None:
    version = BY_ID["push-read-back"]["traitdeck"]["version"]
    assert kdcube_props.differs(_target("drift-read"), version) == ["agents.main"]


def test_it_refuses_a_push_the_code_defaults_would_undo_by_name() -> None:
    target = Target(
        props={},
        defaults={"surfaces": {"as_consumer": {"default_agent": "main", "agents": {"main": {}}}}},
    )
    version = {"surfaces": {"as_consumer": {"agents": {"other": {"tools": []}}}}}
    with pytest.raises(PushRefused) as err:
        kdcube_props.push_patch(target, version)
    assert "default_agent" in str(err.value)
    assert "agents.main" in str(err.value)


def test_it_hashes_a_subtree_stably_whatever_the_key_order() -> None:
    assert kdcube_props.subtree_hash({"a": 1, "b": [1, 2]}) == kdcube_props.subtree_hash(
        {"b": [1, 2], "a": 1}
    )


def test_the_runtime_gives_the_model_traitdecks_effective_view_after_the_push() -> None:
    # Recorded: the runtime's loader and tool subsystem over defaults ← the props KDCube stored.
    from conformance.families import config

    back = BY_ID["push-read-back"]
    view = config.predict(
        {"policy": back["traitdeck"]["version"], "agent": "main", "manifest": {}, "role": "parent"}
    )
    assert view == back["model_facing"]
    assert "mcp.knowledge.search_docs" in [tool["id"] for tool in view]


def test_it_refuses_to_push_a_secret_that_was_not_imported_by_path() -> None:
    pulled, secrets = kdcube_props.pulled_subtree(
        {
            "mcp": {"services": {"mcpServers": {"k": {"headers": {"X-Api-Key": "plain"}}}}},
            "agents": {"main": {"tools": []}},
        }
    )
    assert secrets == ["mcp.services.mcpServers.k.headers.X-Api-Key"]
    with pytest.raises(PushRefused) as err:
        kdcube_props.push_patch(
            Target(props={}, defaults={}), {"surfaces": {"as_consumer": pulled}}
        )
    assert "mcp.services.mcpServers.k.headers.X-Api-Key" in str(err.value)


def test_a_pull_keeps_the_reference_traitdeck_holds_at_a_credential() -> None:
    ours = {"mcp": {"services": {"k": {"env": {"TOKEN": "env:K_TOKEN"}}}}}
    pulled, secrets = kdcube_props.pulled_subtree(
        {"mcp": {"services": {"k": {"env": {"TOKEN": "resolved", "MODE": "${secret:a.b}"}}}}}, ours
    )
    assert secrets == []
    assert pulled["mcp"]["services"]["k"]["env"] == {
        "TOKEN": "env:K_TOKEN",
        "MODE": "${secret:a.b}",
    }


def test_it_refuses_to_push_over_the_legacy_shape_instead_of_writing_beside_it() -> None:
    target = Target(props={"tools": {"agents": {"main": [{"kind": "python"}]}}}, defaults={})
    version = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}}
    with pytest.raises(PushRefused) as err:
        kdcube_props.push_patch(target, version)
    assert "tools.agents" in str(err.value)


def test_the_recording_shows_a_null_mcp_server_cannot_be_opened() -> None:
    # Why a server the version drops is sent as null: the runtime's services config then has
    # no usable entry for it, as if it had never been configured.
    assert BY_ID["merge-list-without-a-tool"]["loader"]["mcp_servers"] == {"knowledge": True}
    assert BY_ID["merge-server-null"]["loader"]["mcp_servers"] == {"knowledge": False}
