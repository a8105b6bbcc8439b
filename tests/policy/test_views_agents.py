"""The agents pages: list, add, rename, remove, connections and the agent page's rows.

Over 500 lines: these pages share one set of helpers and one draft shape; split by page they
would copy them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from policy.models import AgentManifest
from policy.selectors import draft_state
from policy.services import manifest_upload
from tests.conftest import make_user
from tests.policy.conftest import exported_agents as agents
from tests.policy.conftest import exported_connections as connections
from tests.policy.conftest import seed_agents as seed

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
EARLY = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}


@pytest.fixture
def editor(client: Client) -> Client:
    get_user_model().objects.create_superuser("ana", password="pw-ana-123")
    client.login(username="ana", password="pw-ana-123")
    return client


def exported() -> dict[str, Any]:
    """The draft as the runtime reads the exported YAML."""
    data: dict[str, Any] = yaml.safe_load(draft_state().text)
    return data


def revision() -> int:
    return draft_state().revision


def page(response: Any) -> str:
    text: str = response.content.decode()
    return text


# --- login ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/policy/", "/policy/agents/main/", "/policy/agents/main/connections/0/edit/"]
)
def test_anonymous_visitors_are_sent_to_the_login_page(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_an_anonymous_post_changes_nothing(client: Client) -> None:
    response = client.post("/policy/agents/add/", {"name": "main", "base_revision": "0"})
    assert response.status_code == 302
    assert draft_state().agents == []


# --- the agents page -----------------------------------------------------------------------


def test_an_empty_draft_says_so_and_offers_import(editor: Client) -> None:
    text = page(editor.get("/policy/"))
    assert "No agents yet — add one, or" in text
    assert 'href="/policy/import/"' in text
    assert 'name="base_revision" value="0"' in text


def test_the_agents_page_counts_connections_tools_and_problems(editor: Client) -> None:
    seed(
        main={
            "tools": [
                {"ref": "t.py", "alias": "jobs", "allowed": ["search", "export"]},
                {"kind": "mcp", "server_id": "browser", "allowed": ["open"]},
                {"kind": "python", "alias": "broken"},
            ]
        },
        quiet={"tools": []},
    )
    text = page(editor.get("/policy/"))
    row = text[text.index('data-agent="main"') :]
    row = row[: row.index("</tr>")]
    cells = [part.split("</td>")[0].strip() for part in row.split("<td>")[1:]]
    assert cells[1:3] == ["3", "3"]
    assert "error" not in row  # a python connection without module/ref only warns
    assert "4 warnings" in row  # three tools without a strategy, and that connection
    quiet = text[text.index('data-agent="quiet"') :]
    assert "no problems" in quiet[: quiet.index("</tr>")]


def test_adding_an_agent_swaps_the_page_and_pushes_its_url(editor: Client) -> None:
    response = editor.post("/policy/agents/add/", {"name": "main", "base_revision": "0"}, **HTMX)
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#main"
    assert response["HX-Push-Url"] == "/policy/"
    assert 'data-agent="main"' in page(response)
    assert "<html" not in page(response)
    assert agents() == {"main": {"tools": []}}
    assert revision() == 1


def test_without_javascript_adding_redirects_back_to_the_agents_page(editor: Client) -> None:
    response = editor.post("/policy/agents/add/", {"name": "main", "base_revision": "0"})
    assert response.status_code == 302
    assert response["Location"] == "/policy/"


def test_adding_a_duplicate_agent_is_refused_with_a_message(editor: Client) -> None:
    base = seed(main={"tools": []})
    response = editor.post("/policy/agents/add/", {"name": "main", "base_revision": base}, **HTMX)
    assert response.status_code == 422
    assert response["HX-Retarget"] == "#problem"
    assert "an agent named &#x27;main&#x27; already exists" in page(response)
    assert revision() == base


@pytest.mark.parametrize("name", ["", "has space", "-dash", "a/b", "x" * 101])
def test_a_bad_agent_name_is_refused_with_the_rule(editor: Client, name: str) -> None:
    response = editor.post("/policy/agents/add/", {"name": name, "base_revision": "0"}, **HTMX)
    assert response.status_code == 422
    text = page(response)
    assert "Give the agent a name." in text or "An agent name is 1–100 letters" in text
    assert draft_state().agents == []


def test_a_stale_revision_gets_409_and_changes_nothing(editor: Client) -> None:
    seed(main={"tools": []})
    before = draft_state()
    response = editor.post(
        "/policy/agents/add/", {"name": "other", "base_revision": before.revision - 1}, **HTMX
    )
    assert response.status_code == 409
    assert response["HX-Retarget"] == "#problem"
    assert "The draft changed since you loaded it" in page(response)
    after = draft_state()
    assert (after.revision, after.text) == (before.revision, before.text)


def test_a_form_without_base_revision_is_refused(editor: Client) -> None:
    response = editor.post("/policy/agents/add/", {"name": "main"}, **HTMX)
    assert response.status_code == 422
    assert "did not say which draft revision" in page(response)
    assert draft_state().agents == []


def test_renaming_an_agent_keeps_its_place_and_renames_its_manifest(editor: Client) -> None:
    base = seed(a={"tools": []}, main={"tools": [{"ref": "t.py", "alias": "jobs"}]}, z={})
    manifest_upload(agent="main", data={"jobs.search": {}})
    base = draft_state().revision  # a manifest upload is a change too
    response = editor.post(
        "/policy/agents/main/rename/", {"name": "lead", "base_revision": base}, **HTMX
    )
    assert response.status_code == 200
    assert list(agents()) == ["a", "lead", "z"]
    assert agents()["lead"]["tools"] == [{"ref": "t.py", "alias": "jobs"}]
    assert list(AgentManifest.objects.values_list("agent", flat=True)) == ["lead"]


def test_a_renamed_agent_does_not_adopt_a_stale_manifest(editor: Client) -> None:
    base = seed(main={"tools": []})
    manifest_upload(agent="gone", data={"x.y": {}})  # left behind by an import
    base = draft_state().revision  # a manifest upload is a change too
    editor.post("/policy/agents/main/rename/", {"name": "gone", "base_revision": base}, **HTMX)
    assert not AgentManifest.objects.exists()


def test_renaming_onto_another_agent_is_refused(editor: Client) -> None:
    base = seed(a={}, b={})
    response = editor.post("/policy/agents/a/rename/", {"name": "b", "base_revision": base}, **HTMX)
    assert response.status_code == 422
    assert "already exists" in page(response)
    assert list(agents()) == ["a", "b"]


def test_removing_an_agent_asks_first_and_removes_its_manifest(editor: Client) -> None:
    base = seed(main={"tools": []}, other={"tools": []})
    manifest_upload(agent="main", data={})
    base = draft_state().revision  # a manifest upload is a change too
    assert 'hx-confirm="Remove agent “main”' in page(editor.get("/policy/"))
    response = editor.post("/policy/agents/main/remove/", {"base_revision": base}, **HTMX)
    assert response.status_code == 200
    assert list(agents()) == ["other"]
    assert not AgentManifest.objects.filter(agent="main").exists()


def test_removing_an_unknown_agent_is_404(editor: Client) -> None:
    base = seed(main={})
    response = editor.post("/policy/agents/nope/remove/", {"base_revision": base}, **HTMX)
    assert response.status_code == 404


# --- the agent page ------------------------------------------------------------------------

RICH = {
    "tools": [
        {
            "ref": "tools/jobs.py",
            "alias": "jobs",
            "allowed": ["search", "launch", "export"],
            "tool_traits": {
                "search": {"strategy": ["exploration"]},
                "launch": {"strategy": ["neutral"], "execution": EARLY},
            },
            "tool_execution": {"export": {"timeout_s": 20, "mode": "sync", "retry": "natural_key"}},
        },
        {"kind": "mcp", "server_id": "browser", "alias": "web", "allowed": ["open"]},
        {
            "kind": "named_service",
            "namespaces": {"task": {"allowed": ["object.search", "object.bogus"]}},
        },
    ]
}


def tool_row(text: str, tool_id: str) -> str:
    """The HTML of one tool row and the rows that follow it up to the next tool row."""
    start = text.index(f'data-tool="{tool_id}"')
    end = text.find('class="tool-row', start)
    return text[start : end if end > 0 else len(text)]


def test_the_agent_page_shows_connections_in_order_with_their_source(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    positions = [text.index(f'id="connection-{i}"') for i in range(3)]
    assert positions == sorted(positions)
    assert "<code>tools/jobs.py</code>" in text
    assert "<code>browser</code>" in text
    assert "object.search, object.bogus" in text
    for name in ("effective", "catalog", "playground"):
        assert f'href="/policy/agents/main/{name}/"' in text


def test_each_tool_row_shows_strategy_early_design_and_its_own_diagnostics(
    editor: Client,
) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    launch = tool_row(text, "jobs.launch")
    assert "starts early" in launch
    assert 'data-code="early-without-idempotency"' in launch
    export = tool_row(text, "jobs.export")
    assert "unknown — runs alone" in export
    assert "20 s" in export
    assert "sync" in export
    assert "natural_key" in export
    assert 'data-code="strategy-unknown"' in export
    assert "Fix: Add a strategy under tool_traits.export" in export
    search = tool_row(text, "jobs.search")
    assert "exploration" in search
    assert 'data-code="strategy-unknown"' not in search
    assert 'href="/policy/agents/main/connections/0/tools/search/"' in search


def test_connection_level_diagnostics_sit_on_the_connection(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    named = text[text.index('id="connection-2"') :]
    head = named[: named.index("<table")]
    assert 'data-code="operation-unknown"' in head


def test_the_builtins_are_listed_read_only_after_the_connections(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    builtins = text[text.index("Built-in tools") :]
    assert text.index('id="connection-2"') < text.index("Built-in tools")
    delegate = tool_row(builtins, "react.delegate")
    assert "starts early" in delegate
    assert "Edit" not in builtins[: builtins.index("</table>")]


def test_an_unknown_agent_is_a_404_page(editor: Client) -> None:
    seed(main={})
    assert editor.get("/policy/agents/nope/").status_code == 404


def test_htmx_navigation_gets_only_the_page_content(editor: Client) -> None:
    seed(main=RICH)
    response = editor.get("/policy/agents/main/", **HTMX)
    assert "<html" not in page(response)
    assert 'id="connection-0"' in page(response)
    assert "HX-Request" in response["Vary"]


def test_names_with_html_are_escaped(editor: Client) -> None:
    seed(
        **{
            "<img src=x onerror=alert(1)>": {
                "tools": [{"ref": "t.py", "alias": "a", "allowed": ["<script>alert(1)</script>"]}]
            }
        }
    )
    listing = page(editor.get("/policy/"))
    assert "<img src=x" not in listing
    assert "&lt;img src=x onerror=alert(1)&gt;" in listing
    detail = page(editor.get("/policy/agents/%3Cimg%20src=x%20onerror=alert(1)%3E/"))
    assert "<script>alert(1)</script>" not in detail
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail
    assert "<img src=x" not in detail


# --- connections ---------------------------------------------------------------------------


def test_the_add_form_is_kind_specific_and_carries_the_revision(editor: Client) -> None:
    base = seed(main={"tools": []})
    python = page(editor.get("/policy/agents/main/connections/new/?kind=python"))
    assert 'name="module"' in python
    assert 'name="ref"' in python
    assert f'name="base_revision" value="{base}"' in python
    mcp = page(editor.get("/policy/agents/main/connections/new/?kind=mcp"))
    assert 'name="server_id"' in mcp
    assert 'name="all_tools"' in mcp
    named = page(editor.get("/policy/agents/main/connections/new/?kind=named_service"))
    assert 'value="object.search"' in named
    assert "object.search → search_objects" in named
    assert editor.get("/policy/agents/main/connections/new/?kind=bogus").status_code == 404


def test_adding_a_python_connection_exports_what_the_runtime_needs(editor: Client) -> None:
    base = seed(main={"tools": []})
    response = editor.post(
        "/policy/agents/main/connections/new/",
        {
            "kind": "python",
            "base_revision": base,
            "ref": "tools/jobs.py",
            "module": "",
            "alias": "jobs",
            "allowed": "search, export_report\nlaunch_background_job\n",
        },
        **HTMX,
    )
    assert response.status_code == 200
    assert response["HX-Push-Url"] == "/policy/agents/main/"
    assert connections() == [
        {
            "kind": "python",
            "alias": "jobs",
            "ref": "tools/jobs.py",
            "allowed": ["search", "export_report", "launch_background_job"],
        }
    ]
    assert 'data-tool="jobs.launch_background_job"' in page(response)


def test_adding_an_mcp_connection_with_all_tools_writes_the_star(editor: Client) -> None:
    base = seed(main={"tools": []})
    editor.post(
        "/policy/agents/main/connections/new/",
        {"kind": "mcp", "base_revision": base, "server_id": "browser", "all_tools": "on"},
        **HTMX,
    )
    assert connections() == [{"kind": "mcp", "server_id": "browser", "allowed": ["*"]}]
    assert "allowed:\n" in draft_state().text


def test_adding_a_named_service_writes_operation_ids_under_namespaces(editor: Client) -> None:
    base = seed(main={"tools": []})
    editor.post(
        "/policy/agents/main/connections/new/",
        {
            "kind": "named_service",
            "base_revision": base,
            "alias": "",
            "ns-count": "1",
            "ns-0-name": "task",
            "ns-0-ops": ["object.upsert", "provider.about", "object.search"],
        },
        **HTMX,
    )
    assert connections() == [
        {
            "kind": "named_service",
            "namespaces": {
                "task": {"allowed": ["provider.about", "object.search", "object.upsert"]}
            },
        }
    ]


def test_an_invalid_connection_form_shows_its_errors_and_saves_nothing(editor: Client) -> None:
    base = seed(main={"tools": []})
    response = editor.post(
        "/policy/agents/main/connections/new/",
        {"kind": "python", "base_revision": base, "alias": ""},
        **HTMX,
    )
    assert response.status_code == 422
    text = page(response)
    assert 'id="connection-editor"' in text
    assert "A python connection needs module or ref" in text
    assert "needs an alias" in text
    assert revision() == base


def test_editing_a_connection_keeps_every_key_the_form_does_not_manage(editor: Client) -> None:
    base = seed(
        main={
            "tools": [
                {
                    "kind": "mcp",
                    "module": "legacy.mod",
                    "server_id": "browser",
                    "discovery": {"refresh_s": 60},
                    "allowed": ["open", "click"],
                    "tool_traits": {"open": {"strategy": ["exploration"]}},
                }
            ]
        }
    )
    form = page(editor.get("/policy/agents/main/connections/0/edit/"))
    assert 'value="browser"' in form
    assert "open\nclick</textarea>" in form
    editor.post(
        "/policy/agents/main/connections/0/edit/",
        {
            "kind": "mcp",
            "base_revision": base,
            "server_id": "browser",
            "alias": "web",
            "allowed": "open\nclick\nclose",
        },
        **HTMX,
    )
    assert connections() == [
        {
            "kind": "mcp",
            "module": "legacy.mod",
            "server_id": "browser",
            "discovery": {"refresh_s": 60},
            "allowed": ["open", "click", "close"],
            "tool_traits": {"open": {"strategy": ["exploration"]}},
            "alias": "web",
        }
    ]


def test_editing_a_named_service_keeps_overrides_and_unknown_operations(editor: Client) -> None:
    override = {"search_objects": {"strategy": ["neutral"]}}
    base = seed(
        main={
            "tools": [
                {
                    "kind": "named_service",
                    "namespaces": {
                        "task": {
                            "allowed": ["object.search", "object.bogus"],
                            "tool_traits": override,
                        }
                    },
                }
            ]
        }
    )
    form = page(editor.get("/policy/agents/main/connections/0/edit/"))
    assert "<code>object.bogus</code>" in form  # shown as kept, not as a checkbox
    editor.post(
        "/policy/agents/main/connections/0/edit/",
        {
            "kind": "named_service",
            "base_revision": base,
            "ns-count": "2",
            "ns-0-name": "tasks",
            "ns-0-original": "task",
            "ns-0-ops": ["object.search", "object.get"],
            "ns-1-name": "",
        },
        **HTMX,
    )
    assert connections()[0]["namespaces"] == {
        "tasks": {
            "allowed": ["object.search", "object.bogus", "object.get"],
            "tool_traits": override,
        }
    }


def test_connections_move_up_and_down_and_can_be_removed(editor: Client) -> None:
    base = seed(main={"tools": [{"alias": "a"}, {"alias": "b"}, {"alias": "c"}]})
    editor.post(
        "/policy/agents/main/connections/2/move/",
        {"direction": "up", "base_revision": base},
        **HTMX,
    )
    assert [c["alias"] for c in connections()] == ["a", "c", "b"]
    editor.post(
        "/policy/agents/main/connections/0/move/",
        {"direction": "down", "base_revision": base + 1},
        **HTMX,
    )
    assert [c["alias"] for c in connections()] == ["c", "a", "b"]
    response = editor.post(
        "/policy/agents/main/connections/1/remove/", {"base_revision": base + 2}, **HTMX
    )
    assert response.status_code == 200
    assert [c["alias"] for c in connections()] == ["c", "b"]


def test_moving_the_first_connection_up_is_refused(editor: Client) -> None:
    base = seed(main={"tools": [{"alias": "a"}, {"alias": "b"}]})
    response = editor.post(
        "/policy/agents/main/connections/0/move/",
        {"direction": "up", "base_revision": base},
        **HTMX,
    )
    assert response.status_code == 422
    assert "cannot move connection #1" in page(response)
    assert revision() == base


def test_removing_a_connection_asks_first(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    assert 'hx-confirm="Remove connection #1 (python jobs)' in text


def test_a_stale_connection_edit_changes_nothing(editor: Client) -> None:
    base = seed(main={"tools": [{"alias": "a"}, {"alias": "b"}]})
    seed(main={"tools": [{"alias": "b"}]})
    before = draft_state().text
    response = editor.post(
        "/policy/agents/main/connections/0/remove/", {"base_revision": base}, **HTMX
    )
    assert response.status_code == 409
    assert "Nothing was saved" in page(response)
    assert draft_state().text == before


# --- manifest ------------------------------------------------------------------------------


def test_a_pasted_manifest_is_stored_and_its_state_shown(editor: Client) -> None:
    base = seed(main={"tools": [{"ref": "t.py", "alias": "jobs"}]})
    manifest = {"jobs.search": {"tool_traits": {"strategy": ["exploration"]}}, "jobs.export": {}}
    response = editor.post(
        "/policy/agents/main/manifest/",
        {"text": json.dumps(manifest), "base_revision": base},
        **HTMX,
    )
    assert response.status_code == 200
    assert AgentManifest.objects.get(agent="main").data == manifest
    text = page(response)
    assert "2 tools, uploaded" in text
    # The discovered tools now appear as rows of the connection that lists no tools.
    assert 'data-tool="jobs.search"' in text
    assert 'data-tool="jobs.export"' in text


def test_a_manifest_file_is_stored(editor: Client) -> None:
    base = seed(main={"tools": []})
    upload = SimpleUploadedFile("manifest.json", b'{"a.b": {"tool_traits": {}}}')
    response = editor.post(
        "/policy/agents/main/manifest/", {"file": upload, "base_revision": base}, **HTMX
    )
    assert response.status_code == 200
    assert AgentManifest.objects.get(agent="main").data == {"a.b": {"tool_traits": {}}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "The manifest is not valid JSON: Expecting property name"),
        ('["a.b"]', "The manifest must be a JSON object"),
        ('{"a.b": {"tool_traits": 5}}', "must be an object, not a number"),
        ("", "Choose a manifest file or paste its JSON."),
    ],
)
def test_a_malformed_manifest_is_refused_with_a_clear_message(
    editor: Client, text: str, message: str
) -> None:
    seed(main={"tools": []})
    response = editor.post("/policy/agents/main/manifest/", {"text": text}, **HTMX)
    assert response.status_code == 422
    assert message in page(response)
    assert 'id="manifest"' in page(response)
    assert not AgentManifest.objects.exists()


def test_a_connection_of_unknown_kind_is_explained_not_edited(editor: Client) -> None:
    base = seed(main={"tools": [{"kind": "grpc", "alias": "x", "discovery": True}]})
    text = page(editor.get("/policy/agents/main/connections/0/edit/"))
    assert "is not python, mcp or named_service" in text
    assert 'name="alias"' not in text
    response = editor.post(
        "/policy/agents/main/connections/0/edit/", {"base_revision": base, "alias": "y"}, **HTMX
    )
    assert response.status_code == 422
    assert connections() == [{"kind": "grpc", "alias": "x", "discovery": True}]


def test_a_conflict_reload_link_goes_back_to_the_page_the_user_was_on(client) -> None:  # type: ignore[no-untyped-def]

    make_user("rel", "editor", password="pw-rel-123")
    client.login(username="rel", password="pw-rel-123")
    client.post("/policy/agents/add/", {"name": "first", "base_revision": "0"})
    response = client.post(
        "/policy/agents/add/",
        {"name": "second", "base_revision": "0"},
        headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/policy/?x=1"},
    )
    assert response.status_code == 409
    assert 'href="/policy/?x=1">Reload</a>' in response.content.decode()
    foreign = client.post(
        "/policy/agents/add/",
        {"name": "third", "base_revision": "0"},
        headers={"HX-Request": "true", "HX-Current-URL": "https://evil.example/policy/"},
    )
    assert 'href="/policy/">Reload</a>' in foreign.content.decode()


def test_a_manifest_with_a_nul_character_is_refused_by_the_browser_form_too(client) -> None:  # type: ignore[no-untyped-def]
    import json

    from policy.models import AgentManifest

    make_user("nul", "editor", password="pw-nul-123")
    client.login(username="nul", password="pw-nul-123")
    client.post("/policy/agents/add/", {"name": "main", "base_revision": "0"})
    manifest = json.dumps({"jobs.search": {"tool_traits": {"strategy": ["exploration\u0000"]}}})
    response = client.post("/policy/agents/main/manifest/", {"text": manifest})
    assert response.status_code == 422
    assert "NUL character" in response.content.decode()
    assert not AgentManifest.objects.exists()


def test_draft_agent_names_follow_the_draft_without_copying_it(client) -> None:  # type: ignore[no-untyped-def]

    from policy.selectors import draft_agent_names, draft_state

    assert draft_agent_names() == []
    make_user("names", "editor", password="pw-names-123")
    client.login(username="names", password="pw-names-123")
    client.post("/policy/agents/add/", {"name": "alpha", "base_revision": "0"})
    client.post("/policy/agents/add/", {"name": "beta", "base_revision": "1"})
    assert draft_agent_names() == ["alpha", "beta"] == draft_state().agents
