from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from policy.selectors import draft_state
from policy.services import manifest_upload
from tests.markup import assert_alert, document, find, find_all, is_fragment, text_of
from tests.policy.conftest import diagnostic_codes, exported_connections, tool_rows
from tests.policy.conftest import seed_connections as seed

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
EARLY = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}
JOBS = "/policy/agents/main/connections/0/tools"


@pytest.fixture
def editor(client: Client) -> Client:
    get_user_model().objects.create_superuser("ana", password="pw-ana-123")
    client.login(username="ana", password="pw-ana-123")
    return client


def connection(index: int = 0) -> dict[str, Any]:
    return exported_connections()[index]


def page(response: Any) -> str:
    text: str = response.content.decode()
    return text


def codes(html: str) -> list[str]:
    """The codes of the diagnostics the page lists."""
    return diagnostic_codes(document(html))


def jobs(**extra: Any) -> dict[str, Any]:
    return {
        "kind": "python",
        "ref": "tools/jobs.py",
        "alias": "jobs",
        "allowed": ["search", "launch", "export"],
        **extra,
    }


def form(base: int, **fields: Any) -> dict[str, Any]:
    return {"base_revision": base, **fields}


# --- the form --------------------------------------------------------------------------------


def test_the_form_checks_as_the_admin_types_in_one_round_trip(editor: Client) -> None:
    base = seed(jobs())
    text = page(editor.get(f"{JOBS}/launch/"))
    editor_form = find(text, id="tool-editor").find("form")
    assert editor_form.attrs["hx-post"] == f"{JOBS}/launch/preview/"
    assert editor_form.attrs["hx-trigger"] == "input changed delay:250ms, change"
    assert editor_form.attrs["hx-target"] == "#tool-diagnostics"
    assert editor_form.find("input", name="base_revision").value == str(base)
    strategies = editor_form.find_all("input", type="checkbox", name="strategy")
    assert [box.value for box in strategies] == ["exploration", "exploitation", "neutral"]
    assert editor_form.find("input", type="checkbox", name="early")
    assert editor_form.find("details", class_="advanced").find(name="trigger")
    assert editor_form.find("select", name="mode")
    assert editor_form.find("select", name="retry")
    # What the draft says about the tool right now is there before any typing.
    assert "strategy-unknown" in diagnostic_codes(find(text, id="tool-diagnostics"))


def test_the_form_starts_from_what_is_written(editor: Client) -> None:
    seed(
        jobs(
            tool_traits={"launch": {"strategy": ["neutral"], "execution": EARLY, "owner": "ops"}},
            tool_execution={"launch": {"timeout_s": 5, "retry": "dedup", "confirm": True}},
        )
    )
    text = page(editor.get(f"{JOBS}/launch/"))
    ticked = [box.value for box in find_all(text, "input", name="strategy", checked=None)]
    assert ticked == ["neutral"]
    assert find(text, "input", name="early", checked=None)
    assert find(text, "input", name="timeout_s").value == "5"
    assert find(text, "select", name="retry").value == "dedup"
    # an extension key, shown read-only
    extension = find(text, "dl", class_="kv")
    assert [key.text for key in extension.find_all("dt")] == ["owner"]
    assert not find_all(text, "input", name="owner")


@pytest.mark.parametrize(
    "url",
    [
        f"{JOBS}/nope/",
        "/policy/agents/ghost/connections/0/tools/search/",
        "/policy/agents/main/connections/7/tools/search/",
        f"{JOBS}/search/?namespace=task",
    ],
)
def test_an_unknown_tool_agent_connection_or_namespace_is_404(editor: Client, url: str) -> None:
    seed(jobs())
    assert editor.get(url).status_code == 404


# --- saving --------------------------------------------------------------------------------


def test_saving_early_start_writes_the_full_profile_and_the_strategy(editor: Client) -> None:
    base = seed(jobs())
    response = editor.post(
        f"{JOBS}/launch/",
        form(
            base,
            strategy=["neutral"],
            early="on",
            timeout_s="20",
            mode="sync",
            retry="idempotency_key",
            confirm="on",
            async_alternative="launch_async",
        ),
        **HTMX,
    )
    assert response.status_code == 200
    assert connection()["tool_traits"] == {"launch": {"strategy": ["neutral"], "execution": EARLY}}
    assert connection()["tool_execution"] == {
        "launch": {
            "timeout_s": 20,
            "mode": "sync",
            "retry": "idempotency_key",
            "confirm": True,
            "async_alternative": "launch_async",
        }
    }
    # The agent page comes back with the updated row.
    assert response["HX-Retarget"] == "#main"
    assert response["HX-Push-Url"] == "/policy/agents/main/"
    [row] = find_all(page(response), "tr", data_tool="jobs.launch")
    assert row.find("span", class_="early").text == "starts early"


def test_several_strategies_are_written_as_a_list(editor: Client) -> None:
    base = seed(jobs())
    editor.post(f"{JOBS}/search/", form(base, strategy=["exploitation", "exploration"]), **HTMX)
    assert connection()["tool_traits"] == {"search": {"strategy": ["exploration", "exploitation"]}}


def test_none_ticked_removes_the_strategy_and_keeps_extension_keys(editor: Client) -> None:
    base = seed(jobs(tool_traits={"search": {"strategy": ["exploration"], "owner": "ops"}}))
    editor.post(f"{JOBS}/search/", form(base), **HTMX)
    assert connection()["tool_traits"] == {"search": {"owner": "ops"}}
    text = page(editor.get("/policy/agents/main/"))
    row = find(text, "tr", data_tool="jobs.search")
    assert row.find("span", class_="chip warn").text == "unknown — runs alone"


def test_switching_early_start_off_removes_the_profile(editor: Client) -> None:
    base = seed(jobs(tool_traits={"launch": {"strategy": ["neutral"], "execution": EARLY}}))
    editor.post(f"{JOBS}/launch/", form(base, strategy=["neutral"]), **HTMX)
    assert connection()["tool_traits"] == {"launch": {"strategy": ["neutral"]}}


def test_saving_with_problems_is_allowed_and_they_stay_visible(editor: Client) -> None:
    base = seed(jobs())
    response = editor.post(
        f"{JOBS}/launch/",
        form(base, strategy=["exploration"], trigger="tool_call_complete"),
        **HTMX,
    )
    assert response.status_code == 200
    assert connection()["tool_traits"]["launch"]["execution"] == {"trigger": "tool_call_complete"}
    rows = tool_rows(page(response), "jobs.launch")
    assert "execution-incomplete" in diagnostic_codes(*rows)
    # A warning, as execution-inert: the tool runs, only never early (one outcome, one severity).
    row = find(page(editor.get("/policy/")), "tr", data_agent="main")
    assert not row.find_all("span", class_="bad")
    assert "warning" in row.find("span", class_="warn").text


def test_a_bad_timeout_is_refused_with_a_message_and_nothing_saved(editor: Client) -> None:
    base = seed(jobs())
    for value, message in (("soon", "Enter the timeout as a number"), ("-3", "positive number")):
        response = editor.post(f"{JOBS}/launch/", form(base, timeout_s=value), **HTMX)
        assert response.status_code == 422
        assert message in text_of(page(response), id="tool-editor")
    assert draft_state().revision == base


def test_a_stale_save_gets_409_and_changes_nothing(editor: Client) -> None:
    base = seed(jobs())
    seed(jobs(alias="jobs"))
    before = draft_state()
    response = editor.post(f"{JOBS}/search/", form(base, strategy=["exploration"]), **HTMX)
    assert response.status_code == 409
    assert "The draft changed since you opened this editor" in text_of(
        page(response), id="conflict"
    )
    assert draft_state().text == before.text


def test_a_stale_save_shows_the_draft_now_beside_the_unsaved_input(editor: Client) -> None:
    base = seed(jobs())
    # Meanwhile someone else sets the tool's strategy to neutral.
    current = seed(jobs(tool_traits={"search": {"strategy": ["neutral"]}}))
    response = editor.post(f"{JOBS}/search/", form(base, strategy=["exploration"]), **HTMX)
    assert response.status_code == 409
    html = page(response)
    # The conflict view: the tool as the draft has it now, and what the user sent.
    conflict = find(html, id="conflict")
    assert f"Now in the draft (revision {current})" in conflict.text
    assert "- neutral" in conflict.find("pre", class_="conflict-current").raw_text  # as YAML
    assert "strategy: exploration" in conflict.find("pre", class_="conflict-yours").raw_text
    # The editor comes back holding the input, based on the current revision: saving again
    # applies it knowingly, nothing is lost.
    editor_form = find(html, id="tool-editor")
    assert editor_form.find("input", name="base_revision").value == str(current)
    ticked = editor_form.find_all("input", name="strategy", checked=None)
    assert [box.value for box in ticked] == ["exploration"]
    again = editor.post(f"{JOBS}/search/", form(current, strategy=["exploration"]), **HTMX)
    assert again.status_code == 200
    assert connection()["tool_traits"]["search"]["strategy"] == ["exploration"]


def test_without_javascript_saving_redirects_to_the_agent_page(editor: Client) -> None:
    base = seed(jobs())
    response = editor.post(f"{JOBS}/search/", form(base, strategy=["exploration"]))
    assert response.status_code == 302
    assert response["Location"] == "/policy/agents/main/"


# --- the live check ---------------------------------------------------------------------------


def test_preview_shows_execution_inert_for_exploration_with_early_start(editor: Client) -> None:
    base = seed(jobs())
    before = draft_state().text
    response = editor.post(
        f"{JOBS}/launch/preview/", form(base, strategy=["exploration"], early="on"), **HTMX
    )
    assert response.status_code == 200
    text = page(response)
    assert "execution-inert" in codes(text)
    assert "Fix: Set strategy: [neutral]" in find(text, "li", data_code="execution-inert").text
    assert is_fragment(text)
    assert not find_all(text, id="tool-diagnostics")  # its content, swapped into it
    assert draft_state().revision == base
    assert draft_state().text == before


def test_preview_drops_execution_inert_once_the_strategy_is_neutral(editor: Client) -> None:
    base = seed(jobs())
    response = editor.post(
        f"{JOBS}/launch/preview/", form(base, strategy=["neutral"], early="on"), **HTMX
    )
    text = page(response)
    assert "execution-inert" not in codes(text)
    assert "early-without-idempotency" in codes(text)
    assert "starts early" in document(text).text


def test_preview_only_shows_diagnostics_of_that_tool(editor: Client) -> None:
    base = seed(jobs(tool_traits={"search": {"strategy": ["bogus"]}}))
    text = page(editor.post(f"{JOBS}/launch/preview/", form(base, strategy=["neutral"]), **HTMX))
    assert "strategy-value" not in codes(text)
    assert "strategy-unknown" not in codes(text)


def test_preview_says_nothing_is_unsaved_once_the_form_is_back_to_the_draft(
    editor: Client,
) -> None:
    """The walkthrough: "Unsaved changes" stayed after ticking back to the stored value."""
    base = seed(jobs(tool_traits={"launch": {"strategy": ["neutral"]}}))
    changed = page(
        editor.post(f"{JOBS}/launch/preview/", form(base, strategy=["exploration"]), **HTMX)
    )
    assert "Unsaved changes" in find(changed, "span", id="save-state").text
    back = page(editor.post(f"{JOBS}/launch/preview/", form(base, strategy=["neutral"]), **HTMX))
    state = find(back, "span", id="save-state")
    assert "No unsaved changes" in state.text
    assert f"revision {base}" in state.text


def test_preview_reports_a_bad_field_instead_of_failing(editor: Client) -> None:
    base = seed(jobs())
    response = editor.post(f"{JOBS}/launch/preview/", form(base, timeout_s="soon"), **HTMX)
    assert response.status_code == 200
    assert_alert(page(response), "Enter the timeout as a number")


# --- MCP keys and named-service overrides -----------------------------------------------------

BROWSER = {
    "kind": "mcp",
    "server_id": "browser",
    "alias": "browser",
    "allowed": ["open_page", "click"],
    "tool_traits": {"mcp.browser.open_page": {"strategy": ["exploration"]}},
}


def test_a_qualified_mcp_entry_is_edited_in_place(editor: Client) -> None:
    base = seed(BROWSER)
    text = page(editor.get("/policy/agents/main/"))
    row = find(text, "tr", data_tool="mcp.browser.open_page")
    assert row.find("a").attrs["href"] == (
        "/policy/agents/main/connections/0/tools/mcp.browser.open_page/"
    )
    editor.post(
        "/policy/agents/main/connections/0/tools/mcp.browser.open_page/",
        form(base, strategy=["neutral"], timeout_s="3"),
        **HTMX,
    )
    assert connection()["tool_traits"] == {"mcp.browser.open_page": {"strategy": ["neutral"]}}
    assert connection()["tool_execution"] == {"open_page": {"timeout_s": 3}}


def test_mcp_wildcard_traits_are_edited_under_the_star(editor: Client) -> None:
    base = seed(BROWSER)
    text = page(editor.get("/policy/agents/main/connections/0/tools/*/"))
    assert find(text, id="tool-editor")
    assert not find_all(text, name="timeout_s")  # the wildcard carries traits only
    response = editor.post(
        "/policy/agents/main/connections/0/tools/*/", form(base, strategy=["neutral"]), **HTMX
    )
    assert response.status_code == 200
    assert connection()["tool_traits"]["*"] == {"strategy": ["neutral"]}
    # The wildcard now wins over open_page's own entry: the row says so.
    rows = tool_rows(page(response), "mcp.browser.open_page")
    assert "wildcard-overrides" in diagnostic_codes(*rows)


def test_a_namespace_override_is_written_in_its_namespace(editor: Client) -> None:
    base = seed(
        {
            "kind": "named_service",
            "namespaces": {"task": {"allowed": ["object.search"]}},
            "tool_traits": {"search_objects": {"strategy": ["exploration"]}},
        }
    )
    agent_page = page(editor.get("/policy/agents/main/"))
    url = "/policy/agents/main/connections/0/tools/search_objects/?namespace=task"
    [override] = find_all(agent_page, "a", href=url)
    assert override.text == "Override"
    namespace_form = page(editor.get(url))
    assert find(namespace_form, id="tool-editor")
    assert not find_all(namespace_form, name="timeout_s")
    editor.post(url, form(base, strategy=["neutral"], early="on"), **HTMX)
    saved = connection()
    assert saved["namespaces"]["task"]["tool_traits"] == {
        "search_objects": {"strategy": ["neutral"], "execution": EARLY}
    }
    assert saved["tool_traits"] == {"search_objects": {"strategy": ["exploration"]}}


def test_an_inherited_strategy_is_named_on_the_form(editor: Client) -> None:
    seed({"kind": "python", "ref": "t.py", "alias": "jobs"})
    manifest_upload(agent="main", data={"jobs.search": {"tool_traits": {"strategy": ["neutral"]}}})
    text = page(editor.get(f"{JOBS}/search/"))
    notes = find(text, id="tool-editor").find_all("p", class_="muted")
    assert (
        "Not set here: strategy comes from manifest jobs.search and stays unless you set it."
        in [note.text for note in notes]
    )


def test_tool_names_with_html_are_escaped_in_the_form(editor: Client) -> None:
    seed(jobs(alias="<b>jobs</b>"))
    text = page(editor.get(f"{JOBS}/search/"))
    assert not [bold for bold in find_all(text, "b") if bold.text == "jobs"]  # text, not markup
    assert "<b>jobs</b>.search" in [code.text for code in find_all(text, "code")]
