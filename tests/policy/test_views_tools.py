from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from policy.selectors import draft_state
from policy.services import manifest_upload
from tests.policy.conftest import exported_connections
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
    return [part.split('"', 1)[0] for part in html.split('data-code="')[1:]]


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
    assert f'hx-post="{JOBS}/launch/preview/"' in text
    assert 'hx-trigger="input changed delay:250ms, change"' in text
    assert 'hx-target="#tool-diagnostics"' in text
    assert f'name="base_revision" value="{base}"' in text
    for value in ("exploration", "exploitation", "neutral"):
        assert f'name="strategy" value="{value}"' in text
    assert 'name="early"' in text
    assert "<details" in text
    assert 'name="trigger"' in text
    assert '<select name="mode"' in text
    assert '<select name="retry"' in text
    assert 'id="tool-diagnostics"' in text
    # What the draft says about the tool right now is there before any typing.
    assert 'data-code="strategy-unknown"' in text


def test_the_form_starts_from_what_is_written(editor: Client) -> None:
    seed(
        jobs(
            tool_traits={"launch": {"strategy": ["neutral"], "execution": EARLY, "owner": "ops"}},
            tool_execution={"launch": {"timeout_s": 5, "retry": "dedup", "confirm": True}},
        )
    )
    text = page(editor.get(f"{JOBS}/launch/"))
    assert 'value="neutral" id="id_strategy_2" checked' in text
    assert 'name="early" id="id_early" checked' in text
    assert 'name="timeout_s" value="5"' in text
    assert '<option value="dedup" selected>' in text
    assert "<code>owner</code>" in text  # an extension key, shown read-only


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
    row = page(response)[page(response).index('data-tool="jobs.launch"') :]
    assert "starts early" in row[: row.index("</tr>")]


def test_several_strategies_are_written_as_a_list(editor: Client) -> None:
    base = seed(jobs())
    editor.post(f"{JOBS}/search/", form(base, strategy=["exploitation", "exploration"]), **HTMX)
    assert connection()["tool_traits"] == {"search": {"strategy": ["exploration", "exploitation"]}}


def test_none_ticked_removes_the_strategy_and_keeps_extension_keys(editor: Client) -> None:
    base = seed(jobs(tool_traits={"search": {"strategy": ["exploration"], "owner": "ops"}}))
    editor.post(f"{JOBS}/search/", form(base), **HTMX)
    assert connection()["tool_traits"] == {"search": {"owner": "ops"}}
    text = page(editor.get("/policy/agents/main/"))
    row = text[text.index('data-tool="jobs.search"') :]
    assert "unknown — runs alone" in row[: row.index("</tr>")]


def test_switching_early_start_off_removes_the_profile(editor: Client) -> None:
    base = seed(jobs(tool_traits={"launch": {"strategy": ["neutral"], "execution": EARLY}}))
    editor.post(f"{JOBS}/launch/", form(base, strategy=["neutral"]), **HTMX)
    assert connection()["tool_traits"] == {"launch": {"strategy": ["neutral"]}}


def test_saving_with_errors_is_allowed_and_they_stay_visible(editor: Client) -> None:
    base = seed(jobs())
    response = editor.post(
        f"{JOBS}/launch/",
        form(base, strategy=["exploration"], trigger="tool_call_complete"),
        **HTMX,
    )
    assert response.status_code == 200
    assert connection()["tool_traits"]["launch"]["execution"] == {"trigger": "tool_call_complete"}
    row = page(response)[page(response).index('data-tool="jobs.launch"') :]
    assert 'data-code="execution-incomplete"' in row
    listing = page(editor.get("/policy/"))
    assert "1 error" in listing


def test_a_bad_timeout_is_refused_with_a_message_and_nothing_saved(editor: Client) -> None:
    base = seed(jobs())
    for value, message in (("soon", "Enter the timeout as a number"), ("-3", "positive number")):
        response = editor.post(f"{JOBS}/launch/", form(base, timeout_s=value), **HTMX)
        assert response.status_code == 422
        assert message in page(response)
        assert 'id="tool-editor"' in page(response)
    assert draft_state().revision == base


def test_a_stale_save_gets_409_and_changes_nothing(editor: Client) -> None:
    base = seed(jobs())
    seed(jobs(alias="jobs"))
    before = draft_state()
    response = editor.post(f"{JOBS}/search/", form(base, strategy=["exploration"]), **HTMX)
    assert response.status_code == 409
    assert "The draft changed since you opened this editor" in page(response)
    assert draft_state().text == before.text


def test_a_stale_save_shows_the_draft_now_beside_the_unsaved_input(editor: Client) -> None:
    base = seed(jobs())
    # Meanwhile someone else sets the tool's strategy to neutral.
    current = seed(jobs(tool_traits={"search": {"strategy": ["neutral"]}}))
    response = editor.post(f"{JOBS}/search/", form(base, strategy=["exploration"]), **HTMX)
    assert response.status_code == 409
    html = page(response)
    # The conflict view: the tool as the draft has it now, and what the user sent.
    assert f"Now in the draft (revision {current})" in html
    assert "- neutral" in html  # the current traits, as YAML
    assert "strategy: exploration" in html  # the unsaved input
    # The editor comes back holding the input, based on the current revision: saving again
    # applies it knowingly, nothing is lost.
    assert 'id="tool-editor"' in html
    assert f'name="base_revision" value="{current}"' in html
    assert re.search(r'value="exploration"[^>]*checked', html)
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
    assert "Fix: Set strategy: [neutral]" in text
    assert "<html" not in text
    assert 'id="tool-diagnostics"' not in text
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
    assert "starts early" in text


def test_preview_only_shows_diagnostics_of_that_tool(editor: Client) -> None:
    base = seed(jobs(tool_traits={"search": {"strategy": ["bogus"]}}))
    text = page(editor.post(f"{JOBS}/launch/preview/", form(base, strategy=["neutral"]), **HTMX))
    assert "strategy-value" not in codes(text)
    assert "strategy-unknown" not in codes(text)


def test_preview_reports_a_bad_field_instead_of_failing(editor: Client) -> None:
    base = seed(jobs())
    response = editor.post(f"{JOBS}/launch/preview/", form(base, timeout_s="soon"), **HTMX)
    assert response.status_code == 200
    assert "Enter the timeout as a number" in page(response)


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
    assert 'href="/policy/agents/main/connections/0/tools/mcp.browser.open_page/"' in text
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
    assert 'name="timeout_s"' not in text  # the wildcard carries traits only
    response = editor.post(
        "/policy/agents/main/connections/0/tools/*/", form(base, strategy=["neutral"]), **HTMX
    )
    assert response.status_code == 200
    assert connection()["tool_traits"]["*"] == {"strategy": ["neutral"]}
    # The wildcard now wins over open_page's own entry: the row says so.
    page_text = page(response)
    row = page_text[page_text.index('data-tool="mcp.browser.open_page"') :]
    assert "wildcard-overrides" in codes(row[: row.index('class="tool-row')])


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
    assert f'href="{url}"' in agent_page
    assert 'name="timeout_s"' not in page(editor.get(url))
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
    assert "comes from manifest jobs.search" in text


def test_tool_names_with_html_are_escaped_in_the_form(editor: Client) -> None:
    seed(jobs(alias="<b>jobs</b>"))
    text = page(editor.get(f"{JOBS}/search/"))
    assert "<b>jobs</b>" not in text
    assert "&lt;b&gt;jobs&lt;/b&gt;.search" in text
