"""Every change records ONE audit entry naming who, what, and the part before → after."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from audit.models import AuditEntry
from policy.domain.yaml_io import body_hash, dump_body
from policy.selectors import draft_state
from policy.services import draft_change, manifest_upload
from tests.audit.conftest import JOBS, only_entry, seed

pytestmark = pytest.mark.django_db

API = "/api/v1/agents"
HTMX = {"HTTP_HX_REQUEST": "true"}


def send(client: Client, method: str, url: str, body: Any = None) -> Any:
    if body is None:
        return client.generic(method, url)
    return client.generic(method, url, json.dumps(body), content_type="application/json")


def test_it_records_a_tool_edit_with_that_tools_traits_before_and_after(
    editor_client: Client, seeded: int
) -> None:
    response = send(
        editor_client,
        "PUT",
        f"{API}/main/connections/0/tools/search",
        {"strategy": ["neutral"], "early": False, "design": {"timeout_s": 30}},
    )
    assert response.status_code == 200
    entry = only_entry()
    assert (entry.action, entry.actor_name) == ("tool.edit", "as-editor")
    assert entry.actor is not None
    assert entry.target == "tool main · jobs.search"
    assert entry.before == {"traits": {"strategy": ["exploration"]}, "design": None}
    assert entry.after["traits"] == {"strategy": ["neutral"]}
    assert entry.after["design"]["timeout_s"] == 30
    assert entry.ref["agent"] == "main"
    assert entry.ref["key"] == "search"


def test_it_records_a_tool_edit_made_in_the_browser(editor_client: Client, seeded: int) -> None:
    response = editor_client.post(
        "/policy/agents/main/connections/0/tools/launch/",
        {"base_revision": seeded, "strategy": ["exploitation"]},
        **HTMX,
    )
    assert response.status_code == 200
    entry = only_entry()
    assert entry.action == "tool.edit"
    assert entry.target == "tool main · jobs.launch"
    assert entry.before == {"traits": None, "design": None}
    assert entry.after["traits"] == {"strategy": ["exploitation"]}


@pytest.mark.parametrize(
    ("method", "url", "body", "action", "before", "after"),
    [
        ("POST", f"{API}/main/connections", {"kind": "mcp", "server_id": "b", "alias": "b"},
         "connection.add", None, {"kind": "mcp", "server_id": "b", "alias": "b"}),
        ("PATCH", f"{API}/main/connections/0", {"alias": "work"},
         "connection.edit", JOBS, {**JOBS, "alias": "work"}),
        ("DELETE", f"{API}/main/connections/0", None, "connection.remove", JOBS, None),
    ],
)  # fmt: skip
def test_it_records_connection_changes_with_the_mapping(
    editor_client: Client,
    seeded: int,
    method: str,
    url: str,
    body: Any,
    action: str,
    before: Any,
    after: Any,
) -> None:
    assert send(editor_client, method, url, body).status_code in (200, 201)
    entry = only_entry()
    assert entry.action == action
    assert entry.target.startswith("agent main · ")
    assert (entry.before, entry.after) == (before, after)


def test_it_records_a_connection_move_as_the_order_before_and_after(
    editor_client: Client,
) -> None:
    seed(main={"tools": [dict(JOBS), {"kind": "mcp", "server_id": "b", "alias": "b"}]})
    assert (
        send(editor_client, "POST", f"{API}/main/connections/0/move", {"to": 1}).status_code == 200
    )
    entry = only_entry()
    assert entry.action == "connection.move"
    assert entry.before == ["#1 python jobs", "#2 mcp b"]
    assert entry.after == ["#1 mcp b", "#2 python jobs"]


def test_it_records_agents_added_renamed_and_removed_in_the_browser(
    editor_client: Client, seeded: int
) -> None:
    base = seeded
    for url, data in [
        ("/policy/agents/add/", {"name": "helper"}),
        ("/policy/agents/helper/rename/", {"name": "aide"}),
        ("/policy/agents/aide/remove/", {}),
    ]:
        response = editor_client.post(url, {**data, "base_revision": base}, **HTMX)
        assert response.status_code == 200, response.content
        base = draft_state().revision
    entries = list(AuditEntry.objects.order_by("id"))
    assert [(e.action, e.target, e.before, e.after) for e in entries] == [
        ("agent.add", "agent helper", None, {"tools": []}),
        ("agent.rename", "agent helper → aide", {"name": "helper"}, {"name": "aide"}),
        ("agent.remove", "agent aide", {"tools": []}, None),
    ]
    assert {e.actor_name for e in entries} == {"as-editor"}


def test_it_records_an_import_as_the_policy_hash_and_agents_before_and_after(
    editor_client: Client, seeded: int
) -> None:
    before_hash = body_hash(dump_body(draft_state().data))
    text = "surfaces:\n  as_consumer:\n    agents:\n      other: {tools: []}\n"
    response = editor_client.post(
        "/api/v1/policy/import?dry_run=false", text, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    entry = only_entry()
    assert (entry.action, entry.target) == ("policy.import", "policy")
    assert entry.before["sha256"] == before_hash
    assert entry.before["agents"] == ["main"]
    assert entry.after["agents"] == ["other"]
    assert entry.after["sha256"] == body_hash(dump_body(draft_state().data))
    # The entry keeps what the import replaced.
    assert "jobs" in entry.before["export"]


def test_an_import_preview_records_nothing(editor_client: Client, seeded: int) -> None:
    text = "surfaces:\n  as_consumer:\n    agents: {}\n"
    response = editor_client.post("/api/v1/policy/import", text, content_type="application/yaml")
    assert response.status_code == 200
    assert not AuditEntry.objects.exists()


def test_it_records_manifest_upload_and_removal(editor_client: Client, seeded: int) -> None:
    manifest_upload(agent="main", data={"jobs.search": {}})
    AuditEntry.objects.all().delete()
    new = {"jobs.search": {"strategy": ["neutral"]}}
    assert send(editor_client, "PUT", f"{API}/main/manifest", new).status_code == 200
    assert send(editor_client, "DELETE", f"{API}/main/manifest").status_code == 200
    upload, removal = AuditEntry.objects.order_by("id")
    assert (upload.action, upload.target) == ("manifest.upload", "manifest main")
    assert (upload.before, upload.after) == ({"jobs.search": {}}, new)
    assert (removal.action, removal.before, removal.after) == ("manifest.remove", new, None)
    assert removal.actor_name == "as-editor"


def test_a_refused_change_records_nothing(editor_client: Client, seeded: int) -> None:
    response = send(editor_client, "PATCH", f"{API}/main/connections/0", {"alias": "x"})
    assert response.status_code == 200
    AuditEntry.objects.all().delete()
    stale = editor_client.generic(
        "PATCH",
        f"{API}/main/connections/0",
        json.dumps({"alias": "y"}),
        content_type="application/json",
        headers={"If-Match": f'"{seeded}"'},
    )
    assert stale.status_code == 409
    assert not AuditEntry.objects.exists()


def test_a_change_without_a_note_records_the_whole_policy(seeded: int) -> None:
    draft_change(edit=lambda doc: doc, base_revision=None, user="someone")
    entry = only_entry()
    assert (entry.action, entry.actor_name, entry.actor) == ("draft.edit", "someone", None)
    assert entry.before["agents"] == entry.after["agents"] == ["main"]


def test_load_sample_policy_records_cli_or_the_named_actor(db: None) -> None:
    call_command("load_sample_policy", "--actor", "maria", stdout=_Sink())
    entry = only_entry()
    assert (entry.action, entry.actor_name) == ("policy.import", "maria")
    assert entry.message == "the sample policy"
    assert entry.before["agents"] == []
    assert entry.after["agents"]


def test_load_sample_policy_without_actor_records_cli(db: None) -> None:
    call_command("load_sample_policy", stdout=_Sink())
    assert only_entry().actor_name == "cli"


class _Sink:
    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


def test_the_named_actor_is_linked_when_such_a_user_exists(
    django_user_model: Any,
) -> None:
    user = django_user_model.objects.create_user("maria", password="pw-maria-123")
    call_command("load_sample_policy", "--actor", "maria", stdout=_Sink())
    assert only_entry().actor == user
