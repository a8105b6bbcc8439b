"""Discovery through the web: the API route, the command, the connection page, Apply
suggestions, versions keeping their manifests — against a real SDK server over stdio."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings

from audit.models import AuditEntry
from policy.models import AgentManifest, PolicyVersion
from policy.selectors import draft_analysis, draft_state
from policy.services import draft_change
from policy.versions import policy_publish, version_manifest
from tests.discovery.conftest import stdio_argv
from tests.markup import find, text_of

pytestmark = pytest.mark.django_db

ARGV = stdio_argv("mixed")
ALLOW = override_settings(TRAITDECK_MCP_STDIO_COMMANDS=json.dumps([list(ARGV)]))
DISCOVER = "/api/v1/agents/main/mcp/files/discover"


def policy(
    *, env: dict[str, str] | None = None, auth: dict[str, str] | None = None
) -> dict[str, Any]:
    config: dict[str, Any] = {"command": ARGV[0], "args": list(ARGV[1:])}
    if env:
        config["env"] = env
    if auth:
        config["auth"] = auth
    return {
        "surfaces": {
            "as_consumer": {
                "mcp": {"services": {"files": config}},
                "agents": {
                    "main": {
                        "tools": [
                            {
                                "kind": "mcp",
                                "server_id": "files",
                                "alias": "fs",
                                "allowed": ["*"],
                                "tool_traits": {"*": {"strategy": ["exploration"]}},
                            }
                        ]
                    }
                },
            }
        }
    }


@pytest.fixture
def draft() -> int:
    return draft_change(edit=lambda _old: policy(), base_revision=None).revision


@ALLOW
def test_it_discovers_over_the_api_and_stores_the_manifest(
    editor_client: Client, draft: int
) -> None:
    response = editor_client.post(DISCOVER)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["tools"], body["pages"], body["aliases"]) == (5, 1, ["fs"])
    assert body["revision"] == draft + 1
    data = AgentManifest.objects.get(agent="main").data
    assert data["mcp.fs.read_file"]["annotations"] == {"readOnlyHint": True}
    assert data["mcp.fs.read_file"]["source"]["by"] == "as-editor"
    codes = {d.code for d in draft_analysis().diagnostics}
    assert {"mcp-wildcard-mixed"} <= codes
    entry = AuditEntry.objects.filter(action="mcp.discover").get()
    assert entry.after["tools"] == 5
    assert entry.after["server_id"] == "files"


def test_it_refuses_a_command_that_is_not_allowlisted(editor_client: Client, draft: int) -> None:
    response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    assert "TRAITDECK_MCP_STDIO_COMMANDS" in response.json()["error"]
    assert not AgentManifest.objects.exists()
    assert draft_state().revision == draft  # nothing changed
    assert AuditEntry.objects.filter(action="mcp.discover").get().after["error"]


def test_a_viewer_may_not_discover(viewer_client: Client, draft: int) -> None:
    assert viewer_client.post(DISCOVER).status_code == 403


@ALLOW
def test_it_answers_404_for_a_server_the_agent_does_not_connect_to(
    editor_client: Client, draft: int
) -> None:
    assert editor_client.post("/api/v1/agents/main/mcp/other/discover").status_code == 404


@override_settings(TRAITDECK_MCP_STDIO_COMMANDS=json.dumps([{"argv": ARGV, "env": ["TOKEN"]}]))
def test_it_reports_a_config_that_needs_a_secret(editor_client: Client) -> None:
    doc = policy(env={"TOKEN": "${secret:files.token}"})
    draft_change(edit=lambda _old: doc, base_revision=None)
    response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    assert "needs a secret Traitdeck cannot read" in response.json()["error"]


@ALLOW
def test_the_token_never_reaches_the_audit_or_the_manifest(
    editor_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FILES_TOKEN", "s3cr3t-token-value")
    doc = policy(auth={"type": "bearer", "env": "FILES_TOKEN"})
    draft_change(edit=lambda _old: doc, base_revision=None)
    assert editor_client.post(DISCOVER).status_code == 200
    stored = json.dumps(AgentManifest.objects.get(agent="main").data)
    audited = json.dumps([e.after for e in AuditEntry.objects.all()])
    assert "s3cr3t" not in stored
    assert "s3cr3t" not in audited


@ALLOW
def test_the_command_lists_every_server_and_exits_1_when_one_fails(draft: int) -> None:
    out = StringIO()
    call_command("discover_tools", "--agent", "main", stdout=out)
    assert "main files: 5 tool(s) on 1 page(s)" in out.getvalue()
    with pytest.raises(CommandError), override_settings(TRAITDECK_MCP_STDIO_COMMANDS=""):
        call_command("discover_tools", "--server", "files", stderr=StringIO())
    with pytest.raises(CommandError, match="no agent"):
        call_command("discover_tools", "--agent", "nobody")


def test_the_button_says_why_it_is_disabled(viewer_client: Client, draft: int) -> None:
    page = viewer_client.get("/policy/agents/main/connections/0/edit/").content.decode()
    button = find(page, "button", id="discover-tools")
    assert button.text == "Discover tools"
    assert "disabled" in button.attrs
    assert text_of(page, id="discover-why").startswith("Disabled: Nothing is allowlisted")


@ALLOW
def test_apply_suggestions_writes_concrete_entries_as_an_ordinary_edit(
    editor_client: Client, draft: int
) -> None:
    editor_client.post(DISCOVER)
    revision = draft_state().revision
    response = editor_client.post(
        "/policy/agents/main/connections/0/suggestions/", {"base_revision": revision}
    )
    assert response.status_code == 200
    page = response.content.decode()
    said = text_of(page, "p", id="discovery-notice")
    assert said.startswith("Applied the suggested traits to the draft.")
    panel = text_of(page, "section", id="discovery")
    assert "rest only on the spec" in said or "Resting only on defaults" in panel
    traits = draft_state().data["surfaces"]["as_consumer"]["agents"]["main"]["tools"][0][
        "tool_traits"
    ]
    assert traits["read_file"] == {"strategy": ["exploration"]}
    assert traits["delete_file"] == {"strategy": ["exploitation"]}
    assert "*" not in traits  # its only key was strategy, which would override the entries
    assert draft_state().revision == revision + 1
    assert "mcp-wildcard-mixed" not in {d.code for d in draft_analysis().diagnostics}
    assert AuditEntry.objects.filter(action="tool.suggestions").exists()
    stale = editor_client.post(
        "/policy/agents/main/connections/0/suggestions/", {"base_revision": revision}
    )
    assert stale.status_code == 409


@ALLOW
def test_a_version_keeps_the_manifest_it_was_published_with(
    editor_client: Client, draft: int
) -> None:
    editor_client.post(DISCOVER)
    version = policy_publish(actor=None, message="first", confirm_warnings=True)
    AgentManifest.objects.filter(agent="main").update(data={})
    kept = version_manifest(PolicyVersion.objects.get(pk=version.pk), "main")
    assert kept is not None
    assert "mcp.fs.read_file" in kept


def test_the_operator_sets_a_source_and_trust_outside_the_policy(
    editor_client: Client, draft: int
) -> None:
    response = editor_client.post(
        "/policy/agents/main/connections/0/mcp-server/",
        {"source_command": json.dumps(list(ARGV)), "trusted": "on"},
    )
    assert response.status_code == 200
    from policy.models import McpServerSetting

    row = McpServerSetting.objects.get(server_id="files")
    assert (row.source_command, row.trusted) == (list(ARGV), True)
    assert draft_state().revision == draft  # not part of the policy: nothing to export
    assert "trusted" not in draft_state().text
    bad = editor_client.post(
        "/policy/agents/main/connections/0/mcp-server/", {"source_command": "python x"}
    )
    assert bad.status_code == 422


PAGED = stdio_argv("paged")


@override_settings(TRAITDECK_MCP_STDIO_COMMANDS=json.dumps([list(PAGED)]))
def test_the_catalog_says_which_tools_the_runtime_never_sees(editor_client: Client) -> None:
    doc = policy()
    doc["surfaces"]["as_consumer"]["mcp"]["services"]["files"] = {
        "command": PAGED[0],
        "args": list(PAGED[1:]),
    }
    draft_change(edit=lambda _old: doc, base_revision=None)
    assert editor_client.post(DISCOVER).json()["pages"] == 3
    page = editor_client.get("/policy/agents/main/catalog/").content.decode()
    unseen = text_of(page, "p", id="unseen")
    assert "never sees 4 discovered tools" in unseen
    assert unseen.endswith(": mcp.fs.tool_3, mcp.fs.tool_4, mcp.fs.tool_5, mcp.fs.tool_6.")
    assert "mcp-beyond-first-page" in {d.code for d in draft_analysis().diagnostics}


def test_a_deeply_nested_source_command_is_refused_never_a_500(
    editor_client: Client, draft: int
) -> None:
    # Issue 34, item 6: `[` x 100,000 was a RecursionError (a 500 and a 3,000-line traceback).
    response = editor_client.post(
        "/policy/agents/main/connections/0/mcp-server/", {"source_command": "[" * 100_000}
    )
    assert response.status_code == 422
    said = text_of(response.content.decode(), "p", id="discovery-notice")
    assert said.startswith("The command must be a JSON array of strings")


@ALLOW
def test_one_discovery_per_server_at_a_time_and_a_global_limit(
    editor_client: Client, draft: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 34, item 7: three 40 MB listings at once took a worker to 650 MiB.
    from discovery import services as services_discovery

    monkeypatch.setattr(services_discovery, "_running", {"files"})
    response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    assert "A discovery of 'files' is already running" in response.json()["error"]
    monkeypatch.setattr(services_discovery, "_running", {"a", "b"})
    response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    assert "TRAITDECK_MCP_CONCURRENT" in response.json()["error"]
    assert not AgentManifest.objects.exists()
    monkeypatch.setattr(services_discovery, "_running", set())
    assert editor_client.post(DISCOVER).status_code == 200
    assert services_discovery._running == set()  # released after the run
