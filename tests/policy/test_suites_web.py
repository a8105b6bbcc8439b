"""Regression suites in the browser and the API (issue 13): save a round as a case, the draft
checked against it on every change, publishing with a failing case only through the override
(recorded in the audit log), import and export as YAML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

from audit.models import AuditEntry
from policy.domain.yaml_io import load_policy
from policy.models import PolicyVersion, SuiteCase
from policy.services import draft_change, draft_replace
from policy.versions import policy_publish
from tests.markup import assert_alert, find, text_of
from tests.observe.live_support import HandRound, ingest

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
SUITE = "/policy/agents/main/suite/"
RULE = "multi_action_bundle_strategy_incompatible"
SEARCH_THEN_EXPORT = {
    "turn_id": "t-1",
    "iteration": 0,
    "max_actions": 3,
    "multi_action_mode": "on",
    "attempts": [
        [
            {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {"q": "x"}},
            {"action": "call_tool", "tool_id": "workspace_jobs.export_report", "params": {}},
        ]
    ],
}


@pytest.fixture
def published() -> None:
    draft_replace(data=load_policy(SAMPLE.read_bytes()).data, base_revision=None)
    policy_publish(actor="cli", message="sample", confirm_warnings=True)


def export_explores() -> None:
    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        traits = doc["surfaces"]["as_consumer"]["agents"]["main"]["tools"][0]["tool_traits"]
        traits["export_report"]["strategy"] = ["exploration"]
        return doc

    draft_change(edit=edit, base_revision=None)


def verdict(page: str) -> str:
    """The suite page's heading: how many cases, and whether they pass under the draft."""
    return find(page, "section", id="suite-cases").find("h2").text


def save_case(client: Client, name: str = "an export may not follow a search") -> Any:
    return client.post(SUITE, {"op": "add", "name": name, "round": json.dumps(SEARCH_THEN_EXPORT)})


def test_a_saved_case_pins_what_the_draft_gets_and_passes(
    editor_client: Client, published: None
) -> None:
    response = save_case(editor_client)
    assert response.status_code == 302
    case = SuiteCase.objects.get(agent="main")
    assert {
        k: v for k, v in case.expect[1].items() if k in ("attempt", "index", "verdict", "rule")
    } == {"attempt": 1, "index": 1, "verdict": "rejected", "rule": RULE}
    page = editor_client.get(SUITE).content.decode()
    assert verdict(page) == "1 case: all pass under the draft"
    assert AuditEntry.objects.filter(action="suite.case_add").count() == 1
    # Saved under the agent the instance assumes (the suite's pin: v3), which the case keeps.
    assert case.round["react_version"] == "v3"
    assert "React agent assumed v3" in " ".join(text_of(page, "p", id="suite-react").split())
    again = save_case(editor_client)
    assert again.status_code == 422
    assert_alert(again.content.decode(), "already has a case named")


def test_a_case_saved_under_v2_pins_what_v2_does_and_keeps_it(
    editor_client: Client, published: None, settings: Any
) -> None:
    """Under v2 (KDCube's default) two action channels run nothing: the saved case pins both as
    action_schema_error and keeps v2, so it still passes once the instance assumes v3."""
    settings.TRAITDECK_REACT_AGENT_VERSION = "v2"
    assert save_case(editor_client).status_code == 302
    case = SuiteCase.objects.get(agent="main")
    assert case.round["react_version"] == "v2"
    assert [(e["verdict"], e.get("rule")) for e in case.expect] == [
        ("rejected", "action_schema_error"),
        ("rejected", "action_schema_error"),
    ]
    page = editor_client.get(SUITE).content.decode()
    assert "React agent assumed v2" in " ".join(text_of(page, "p", id="suite-react").split())
    settings.TRAITDECK_REACT_AGENT_VERSION = "v3"
    assert verdict(editor_client.get(SUITE).content.decode()) == "1 case: all pass under the draft"


def test_a_draft_change_that_breaks_a_case_shows_on_the_agent_and_suite_pages(
    editor_client: Client, published: None
) -> None:
    save_case(editor_client)
    export_explores()
    suite_page = editor_client.get(SUITE).content.decode()
    assert verdict(suite_page) == "1 case: 1 failing under the draft"
    [failure] = find(suite_page, "tr", class_="case fail").find_all("div", class_="failure")
    assert "expected rejected, got accepted" in failure.text
    agent_page = editor_client.get("/policy/agents/main/").content.decode()
    suite_status = find(agent_page, "p", id="suite-status")
    assert suite_status.find("span", class_="chip bad").text == "1 failing under the draft"


def test_publishing_with_a_failing_case_needs_the_override_which_is_audited(
    publisher_client: Client, published: None
) -> None:
    save_case(publisher_client)
    export_explores()
    page = publisher_client.get("/policy/publish/").content.decode()
    assert text_of(page, "h2", id="failing-cases") == "1 regression case fails under the draft"
    refused = publisher_client.post(
        "/policy/publish/", {"message": "explore exports", "confirm_warnings": "on"}
    )
    assert refused.status_code == 422
    assert_alert(refused.content.decode(), "1 regression case fails under the draft")
    assert PolicyVersion.objects.count() == 1
    api = publisher_client.post(
        "/api/v1/versions",
        {"message": "explore exports", "confirm_warnings": True},
        content_type="application/json",
    )
    assert api.status_code == 422
    assert api.json()["needs_confirmation"] is True
    assert api.json()["failing_cases"][0].startswith("main: an export may not follow a search:")
    done = publisher_client.post(
        "/policy/publish/",
        {"message": "explore exports", "confirm_warnings": "on", "override_failing_cases": "on"},
    )
    assert done.status_code == 302
    assert PolicyVersion.objects.count() == 2
    override = AuditEntry.objects.get(action="suite.override")
    assert override.target == "version 2"
    assert override.after["failing"][0].startswith("main: an export may not follow a search")


def test_a_suite_downloads_and_imports_as_yaml(editor_client: Client, published: None) -> None:
    save_case(editor_client)
    download = editor_client.get(SUITE + "?download=1")
    assert download["Content-Type"].startswith("application/yaml")
    data = yaml.safe_load(download.content)
    assert data["agent"] == "main"
    assert [case["name"] for case in data["cases"]] == ["an export may not follow a search"]
    data["cases"][0]["name"] = "renamed"
    imported = editor_client.post(SUITE, {"op": "import", "suite": yaml.safe_dump(data)})
    assert imported.status_code == 302
    assert list(SuiteCase.objects.values_list("name", flat=True)) == ["renamed"]
    bad = editor_client.post(SUITE, {"op": "import", "suite": "agent: main\ncases: 3\n"})
    assert bad.status_code == 422
    assert_alert(bad.content.decode(), "cases: must be a list")
    assert list(SuiteCase.objects.values_list("name", flat=True)) == ["renamed"]


def test_a_viewer_may_read_the_suite_but_not_change_it(
    viewer_client: Client, published: None
) -> None:
    assert viewer_client.get(SUITE).status_code == 200
    assert save_case(viewer_client).status_code == 403
    assert not SuiteCase.objects.exists()


def test_the_round_page_offers_to_save_the_round_as_a_case(
    editor_client: Client, published: None
) -> None:
    ingest(HandRound(turn_id="t-case").started().call(0, "workspace_jobs.search").events)
    page = editor_client.get("/live/rounds/main/t-case/0/").content.decode()
    save = find(page, "details", id="save-case")
    assert save.find("summary").text == "Save as a regression case"
    assert save.find("form").attrs["action"] == "/policy/agents/main/suite/"


# Issue 34, items 4 and 6: a suite is read by the bounded YAML loader, a case is at most 64 KiB of
# JSON, and hostile nesting is a refusal, never a 500.
BOMB = """agent: main
a: &a [xxxxxxxxxx, xxxxxxxxxx, xxxxxxxxxx, xxxxxxxxxx, xxxxxxxxxx, xxxxxxxxxx]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
cases:
  - name: bomb
    round:
      turn_id: t-1
      iteration: 0
      max_actions: 1
      attempts: [[{action: call_tool, tool_id: workspace_jobs.search, params: {q: *e}}]]
    expect: [{index: 0}]
"""


def import_suite(client: Client, text: str) -> Any:
    return client.post(SUITE, {"op": "import", "suite": text})


def test_an_alias_bomb_suite_is_refused_and_nothing_is_stored(
    editor_client: Client, published: None
) -> None:
    assert len(BOMB) < 600
    response = import_suite(editor_client, BOMB)
    assert response.status_code == 422
    assert_alert(response.content.decode(), "aliases expand to more than 100000 nodes")
    assert not SuiteCase.objects.exists()


def test_a_case_over_64_kib_of_json_is_refused_with_a_sentence(
    editor_client: Client, published: None
) -> None:
    suite = {
        "agent": "main",
        "cases": [
            {
                "name": "large",
                "round": {**SEARCH_THEN_EXPORT, "note": "x" * 70_000},
                "expect": [{"index": 0}],
            }
        ],
    }
    response = import_suite(editor_client, yaml.safe_dump(suite))
    assert response.status_code == 422
    assert_alert(response.content.decode(), "a case holds at most 65,536")
    assert not SuiteCase.objects.exists()
    big_round = {**SEARCH_THEN_EXPORT, "note": "x" * 70_000}
    response = editor_client.post(
        SUITE, {"op": "add", "name": "big", "round": json.dumps(big_round)}
    )
    assert response.status_code == 422
    assert_alert(response.content.decode(), "a case holds at most 65,536")
    assert not SuiteCase.objects.exists()


def test_deep_nesting_is_refused_never_a_500(editor_client: Client, published: None) -> None:
    response = import_suite(editor_client, "[" * 5000)
    assert response.status_code == 422
    assert_alert(response.content.decode(), "nests more than 100 levels")
    response = editor_client.post(SUITE, {"op": "add", "name": "deep", "round": "[" * 100_000})
    assert response.status_code == 422
    assert_alert(response.content.decode(), "nests too deeply")
    deep = {**SEARCH_THEN_EXPORT, "note": json.loads("[" * 80 + "]" * 80)}
    response = editor_client.post(SUITE, {"op": "add", "name": "deep", "round": json.dumps(deep)})
    assert response.status_code == 422
    assert_alert(response.content.decode(), "nests more than 64 levels")
    assert not SuiteCase.objects.exists()
