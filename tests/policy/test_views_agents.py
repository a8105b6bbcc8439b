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
from tests.markup import Element, document, find, find_all, is_fragment, text_of
from tests.policy.conftest import diagnostic_codes, tool_rows
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
    empty = find(text, "p", class_="empty")
    assert empty.text == "No agents yet — add one, or import a policy."
    assert empty.find("a", href="/policy/import/").text == "import a policy"
    assert (
        find(text, "form", class_="add-agent").find("input", name="base_revision").attrs["value"]
        == "0"
    )


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
    row = find(text, "tr", data_agent="main")
    cells = [cell.text for cell in row.find_all("td")]
    assert cells[1:3] == ["3", "3"]
    assert "error" not in row.text  # a python connection without module/ref only warns
    # three tools without a strategy, and that connection
    assert [chip.text for chip in row.find_all("span", class_="chip")] == ["4 warnings"]
    quiet = find(text, "tr", data_agent="quiet")
    assert [chip.text for chip in quiet.find_all("span", class_="chip")] == ["no problems"]


def test_adding_an_agent_swaps_the_page_and_pushes_its_url(editor: Client) -> None:
    response = editor.post("/policy/agents/add/", {"name": "main", "base_revision": "0"}, **HTMX)
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#main"
    assert response["HX-Push-Url"] == "/policy/"
    assert find(page(response), "tr", data_agent="main").find("a").text == "main"
    assert is_fragment(page(response))
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
    assert "an agent named 'main' already exists" in text_of(page(response), id="problem")
    assert revision() == base


@pytest.mark.parametrize("name", ["", "has space", "-dash", "a/b", "x" * 101])
def test_a_bad_agent_name_is_refused_with_the_rule(editor: Client, name: str) -> None:
    response = editor.post("/policy/agents/add/", {"name": name, "base_revision": "0"}, **HTMX)
    assert response.status_code == 422
    said = text_of(page(response), id="problem")
    assert "Give the agent a name." in said or "An agent name is 1–100 letters" in said
    assert draft_state().agents == []


def test_a_stale_revision_gets_409_and_changes_nothing(editor: Client) -> None:
    seed(main={"tools": []})
    before = draft_state()
    response = editor.post(
        "/policy/agents/add/", {"name": "other", "base_revision": before.revision - 1}, **HTMX
    )
    assert response.status_code == 409
    assert response["HX-Retarget"] == "#problem"
    assert "The draft changed since you loaded it" in text_of(page(response), id="problem")
    after = draft_state()
    assert (after.revision, after.text) == (before.revision, before.text)


def test_a_form_without_base_revision_is_refused(editor: Client) -> None:
    response = editor.post("/policy/agents/add/", {"name": "main"}, **HTMX)
    assert response.status_code == 422
    assert "did not say which draft revision" in text_of(page(response), id="problem")
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
    assert "already exists" in text_of(page(response), id="problem")
    assert list(agents()) == ["a", "b"]


def test_removing_an_agent_asks_first_and_removes_its_manifest(editor: Client) -> None:
    base = seed(main={"tools": []}, other={"tools": []})
    manifest_upload(agent="main", data={})
    base = draft_state().revision  # a manifest upload is a change too
    row = find(page(editor.get("/policy/")), "tr", data_agent="main")
    confirm = row.find("form", hx_confirm=None).attrs["hx-confirm"]
    assert confirm.startswith("Remove agent “main”, its 0 connections")
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


def tool_row(text: str, tool_id: str) -> list[Element]:
    return tool_rows(text, tool_id)


def codes(rows: list[Element]) -> list[str]:
    return diagnostic_codes(*rows)


def seen(rows: list[Element]) -> str:
    return " ".join(row.text for row in rows)


def test_the_agent_page_shows_connections_in_order_with_their_source(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    shown = [card.attrs["id"] for card in find_all(text, "article", class_="connection")]
    assert shown == ["connection-0", "connection-1", "connection-2"]
    sources = [find(text, id=f"connection-{i}").find("span", class_="source") for i in range(2)]
    assert [source.text for source in sources] == ["ref tools/jobs.py", "server browser"]
    assert "object.search, object.bogus" in text_of(text, id="connection-2")
    for name in ("effective", "catalog", "playground"):
        assert find_all(text, "a", href=f"/policy/agents/main/{name}/")


def test_each_tool_row_shows_strategy_early_design_and_its_own_diagnostics(
    editor: Client,
) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    launch = tool_row(text, "jobs.launch")
    assert launch[0].find("span", class_="early").text == "starts early"
    assert "early-without-idempotency" in codes(launch)
    export = tool_row(text, "jobs.export")
    cells = [cell.text for cell in export[0].find_all("td")]
    assert cells[1:5] == ["unknown — runs alone", "20 s", "sync", "natural_key"]
    assert "strategy-unknown" in codes(export)
    assert "Fix: Add a strategy under tool_traits.export" in seen(export)
    search = tool_row(text, "jobs.search")
    assert search[0].find("span", class_="strategy-exploration").text == "exploration"
    assert "strategy-unknown" not in codes(search)
    edit = search[0].find("a", href="/policy/agents/main/connections/0/tools/search/")
    assert edit.text == "Edit"


def test_connection_level_diagnostics_sit_on_the_connection(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    card = find(text, "article", id="connection-2")
    # The connection's own list, not a tool row's (those sit inside the tools table).
    [own] = [part for part in card.children if part.tag == "ul"]
    assert "operation-unknown" in [item.attrs["data-code"] for item in own.find_all("li")]


def test_the_builtins_are_listed_read_only_after_the_connections(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    order = document(text).iter()
    builtins = find(text, "table", class_="builtins")
    assert order.index(find(text, "article", id="connection-2")) < order.index(builtins)
    delegate = builtins.find("tr", data_tool="react.delegate")
    assert delegate.find("span", class_="early").text == "starts early"
    assert not builtins.find_all("a")
    assert "Edit" not in builtins.text


def test_an_unknown_agent_is_a_404_page(editor: Client) -> None:
    seed(main={})
    assert editor.get("/policy/agents/nope/").status_code == 404


def test_htmx_navigation_gets_only_the_page_content(editor: Client) -> None:
    seed(main=RICH)
    response = editor.get("/policy/agents/main/", **HTMX)
    assert is_fragment(page(response))
    assert find_all(page(response), "article", id="connection-0")
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
    assert not find_all(listing, "img", src="x")  # the name is text, not an element
    row = find(listing, "tr", data_agent="<img src=x onerror=alert(1)>")
    assert row.find("a").text == "<img src=x onerror=alert(1)>"
    detail = page(editor.get("/policy/agents/%3Cimg%20src=x%20onerror=alert(1)%3E/"))
    assert not find_all(detail, "img", src="x")
    assert not [s for s in find_all(detail, "script") if "alert(1)" in s.text]
    assert find(detail, "tr", data_tool="a.<script>alert(1)</script>").find("code").text == (
        "a.<script>alert(1)</script>"
    )


# --- connections ---------------------------------------------------------------------------


def test_the_add_form_is_kind_specific_and_carries_the_revision(editor: Client) -> None:
    base = seed(main={"tools": []})
    python = page(editor.get("/policy/agents/main/connections/new/?kind=python"))
    assert find(python, "input", name="module")
    assert find(python, "input", name="ref")
    assert find(python, "input", name="base_revision").attrs["value"] == str(base)
    assert not find_all(python, name="server_id")
    mcp = page(editor.get("/policy/agents/main/connections/new/?kind=mcp"))
    assert find(mcp, "input", name="server_id")
    assert find(mcp, "input", name="all_tools", type="checkbox")
    assert not find_all(mcp, name="module")
    named = page(editor.get("/policy/agents/main/connections/new/?kind=named_service"))
    search = find(named, "input", type="checkbox", value="object.search")
    [label] = [lab for lab in find_all(named, "label") if search in lab.iter()]
    assert "object.search → search_objects" in label.text
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
    assert find(page(response), "tr", data_tool="jobs.launch_background_job")


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
    form = text_of(text, id="connection-editor")
    assert "A python connection needs module or ref" in form
    assert "needs an alias" in form
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
    assert find(form, "input", name="server_id").attrs["value"] == "browser"
    assert find(form, "textarea", name="allowed").value == "open\nclick"
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
    # shown as kept, not as a checkbox
    assert "object.bogus" in [code.text for code in find_all(form, "code")]
    assert not find_all(form, "input", value="object.bogus")
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
    assert "cannot move connection #1" in text_of(page(response), id="problem")
    assert revision() == base


def test_removing_a_connection_asks_first(editor: Client) -> None:
    seed(main=RICH)
    text = page(editor.get("/policy/agents/main/"))
    confirm = find(text, id="connection-0").find("form", hx_confirm=None).attrs["hx-confirm"]
    assert confirm == "Remove connection #1 (python jobs) and its traits from main?"


def test_a_stale_connection_edit_changes_nothing(editor: Client) -> None:
    base = seed(main={"tools": [{"alias": "a"}, {"alias": "b"}]})
    seed(main={"tools": [{"alias": "b"}]})
    before = draft_state().text
    response = editor.post(
        "/policy/agents/main/connections/0/remove/", {"base_revision": base}, **HTMX
    )
    assert response.status_code == 409
    assert "Nothing was saved" in text_of(page(response), id="problem")
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
    assert "2 tools, uploaded" in text_of(text, id="manifest")
    # The discovered tools now appear as rows of the connection that lists no tools.
    rows = find(text, "article", id="connection-0").find_all("tr", class_="tool-row")
    assert [row.attrs["data-tool"] for row in rows] == ["jobs.search", "jobs.export"]


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
    assert message in text_of(page(response), "section", id="manifest")
    assert not AgentManifest.objects.exists()


def test_a_connection_of_unknown_kind_is_explained_not_edited(editor: Client) -> None:
    base = seed(main={"tools": [{"kind": "grpc", "alias": "x", "discovery": True}]})
    text = page(editor.get("/policy/agents/main/connections/0/edit/"))
    assert "is not python, mcp or named_service" in text_of(text, "main")
    assert not find_all(text, "input", name="alias")
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
    assert find(response.content.decode(), "a", href="/policy/?x=1").text == "Reload"
    foreign = client.post(
        "/policy/agents/add/",
        {"name": "third", "base_revision": "0"},
        headers={"HX-Request": "true", "HX-Current-URL": "https://evil.example/policy/"},
    )
    [reload] = [a for a in find_all(foreign.content.decode(), "a") if a.text == "Reload"]
    assert reload.attrs["href"] == "/policy/"


def test_a_manifest_with_a_nul_character_is_refused_by_the_browser_form_too(client) -> None:  # type: ignore[no-untyped-def]
    import json

    from policy.models import AgentManifest

    make_user("nul", "editor", password="pw-nul-123")
    client.login(username="nul", password="pw-nul-123")
    client.post("/policy/agents/add/", {"name": "main", "base_revision": "0"})
    manifest = json.dumps({"jobs.search": {"tool_traits": {"strategy": ["exploration\u0000"]}}})
    response = client.post("/policy/agents/main/manifest/", {"text": manifest})
    assert response.status_code == 422
    assert "NUL character" in text_of(response.content.decode(), "section", id="manifest")
    assert not AgentManifest.objects.exists()


def test_draft_agent_names_follow_the_draft_without_copying_it(client) -> None:  # type: ignore[no-untyped-def]

    from policy.selectors import draft_agent_names, draft_state

    assert draft_agent_names() == []
    make_user("names", "editor", password="pw-names-123")
    client.login(username="names", password="pw-names-123")
    client.post("/policy/agents/add/", {"name": "alpha", "base_revision": "0"})
    client.post("/policy/agents/add/", {"name": "beta", "base_revision": "1"})
    assert draft_agent_names() == ["alpha", "beta"] == draft_state().agents


def test_an_agent_named_only_in_the_react_config_is_listed_read_only_and_can_get_its_tools(
    editor: Client,
) -> None:
    from policy.services import draft_change

    doc = {
        "surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}},
        "react": {
            "agents": {"helper": {"instructions": {"tool_catalog_detail": "compact"}}},
            "instructions": {"tool_catalog_detail": "full"},
            "reviewer": {"model": "x"},
            "main": {},
        },
    }
    base = draft_change(edit=lambda _old: doc, base_revision=None).revision
    text = page(editor.get("/policy/"))
    listed = [li.attrs["data-react-agent"] for li in find_all(text, "li", data_react_agent=None)]
    assert listed == ["helper", "reviewer"]
    helper = find(text, "li", data_react_agent="helper")
    assert "read-only" in helper.text
    assert "react.agents.helper" in helper.text
    # The runtime falls back for an agent with no tools list of its own (here: main's).
    assert helper.find("strong", class_="runs-with").text == "main"
    response = editor.post("/policy/agents/add/", {"name": "helper", "base_revision": base}, **HTMX)
    assert response.status_code == 200
    assert agents()["helper"] == {"tools": []}
    assert not find_all(page(response), "li", data_react_agent="helper")


def test_react_only_agents_are_listed_as_kdcubes_widget_lists_them(editor: Client) -> None:
    """Recorded from the widget's own code (the ``roster`` conformance family): JavaScript's key
    order puts integer-like keys first, and a name under both ``react.agents`` and ``react``
    lives at the root (the widget writes its block there)."""
    from policy.services import draft_change

    doc = {
        "surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}},
        "react": {"b": {}, "agents": {"a": {}}, "10": {}, "2": {}, "a": {}},
    }
    draft_change(edit=lambda _old: doc, base_revision=None)
    text = page(editor.get("/policy/"))
    listed = [li.attrs["data-react-agent"] for li in find_all(text, "li", data_react_agent=None)]
    assert listed == ["a", "2", "10", "b"]
    assert "(react.a)" in find(text, "li", data_react_agent="a").text


def test_the_connection_page_says_how_it_counts(editor: Client) -> None:
    """The walkthrough read "Edit connection #2" at /connections/1/edit/ with nothing to say which
    count is which."""
    seed(
        main={
            "tools": [
                {"kind": "python", "module": "a.tools", "alias": "a"},
                {"kind": "python", "module": "b.tools", "alias": "b"},
            ]
        }
    )
    page = editor.get("/policy/agents/main/connections/1/edit/").content.decode()
    assert text_of(page, "h1").startswith("Edit connection #2")
    assert text_of(page, id="connection-numbering") == (
        "#2: its place in main's list, counted from 1 as the agent page shows it; the address"
        " and the API count from 0 (index 1)."
    )
