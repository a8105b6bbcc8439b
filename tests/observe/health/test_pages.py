"""The Tools view, one tool's health page and panel, and the editor opened from advice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from observe.services import events_ingest
from tests.markup import find, find_all, is_fragment, text_of
from tests.observe.health.test_api import finished, timed_out
from tests.observe.ingest_support import load_sample_into_draft

pytestmark = pytest.mark.django_db


def rows(html: str) -> list[str]:
    """The tool ids of the table's rows, in order."""
    return [row.attrs["data-tool"] for row in find_all(html, "tr", data_tool=None)]


def _calls() -> None:
    load_sample_into_draft()
    events_ingest([finished("workspace_jobs.search", f"s{i}", 40.0) for i in range(5)])
    events_ingest([finished("mcp.browser.open_page", f"o{i}", 900.0) for i in range(5)])
    events_ingest([finished("react.read", f"r{i}", 4000.0) for i in range(25)])


def test_it_lists_every_tool_of_the_agent_sorted_by_the_chosen_column(
    viewer_client: Client,
) -> None:
    _calls()
    html = viewer_client.get("/live/tools/", {"agent": "main", "sort": "p99_ms"}).content.decode()
    order = rows(html)
    assert order[:3] == ["react.read", "mcp.browser.open_page", "workspace_jobs.search"]
    assert "workspace_jobs.export_report" in order  # no calls, still listed
    ascending = rows(
        viewer_client.get(
            "/live/tools/", {"agent": "main", "sort": "p99_ms", "dir": "asc"}
        ).content.decode()
    )
    assert ascending[:3] == ["workspace_jobs.search", "mcp.browser.open_page", "react.read"]


def test_it_filters_the_tools_by_name(viewer_client: Client) -> None:
    _calls()
    response = viewer_client.get("/live/tools/", {"q": "browser", "partial": "table"})
    assert set(rows(response.content.decode())) == {
        "mcp.browser.open_page",
        "mcp.browser.click",
        "mcp.browser.close",
    }


def test_it_says_so_when_nothing_was_called(viewer_client: Client) -> None:
    load_sample_into_draft()
    response = viewer_client.get("/live/tools/")
    said = text_of(response.content.decode(), "p", class_="empty", role="status")
    assert said.startswith("No tool calls were recorded between")


def test_it_links_advice_to_the_editor_with_the_value_filled_in(editor_client: Client) -> None:
    load_sample_into_draft()
    tool = "workspace_jobs.search"  # timeout_s 2: timeouts at the limit are too tight
    events_ingest([finished(tool, f"s{i}", 300.0) for i in range(30)])
    events_ingest([timed_out(tool, f"x{i}", 2000) for i in range(10)])
    page = editor_client.get(f"/live/tools/main/{tool}/").content.decode()
    advice = find(page, "li", data_code="timeout-too-tight")
    assert "(rests on 40 calls)" in advice.text
    [apply] = [a for a in find_all(page, "a", class_="button") if "filled in" in a.text]
    link = apply.attrs["href"]
    assert "timeout_s=4" in link
    editor = editor_client.get(link)
    text = editor.content.decode()
    assert find(text, "input", name="timeout_s").value == "4"
    note = text_of(text, id="suggested-note")
    assert "Filled in from tool health advice, not saved yet" in note
    assert "the draft has 2" in note


def test_it_loads_the_health_panel_on_the_tool_editor(viewer_client: Client) -> None:
    _calls()
    response = viewer_client.get("/live/tools/main/react.read/", {"partial": "panel"})
    text = response.content.decode()
    assert find(text, "ul", class_="advice").find_all("li", data_code="timeout-suggested")
    assert is_fragment(text)


def test_it_opens_the_editor_untouched_without_a_suggestion(editor_client: Client) -> None:
    load_sample_into_draft()
    page = editor_client.get("/live/tools/main/workspace_jobs.search/").content.decode()
    said = text_of(page, "p", class_="empty", role="status")
    assert said.startswith(("No calls of workspace_jobs.search were recorded", "No tool calls"))


def test_it_puts_the_timeout_bar_on_the_live_page(viewer_client: Client) -> None:
    load_sample_into_draft()
    at = datetime.now(UTC) - timedelta(minutes=3)
    events_ingest([finished("workspace_jobs.search", f"s{i}", 30.0, at=at) for i in range(4)])
    events_ingest([timed_out("workspace_jobs.search", f"x{i}", 2000, at=at) for i in range(4)])
    live = viewer_client.get("/live/").content.decode()
    assert find(live, "div", id="tool-alerts").attrs["hx-get"] == "/live/tools/?partial=alerts"
    bar = viewer_client.get("/live/tools/", {"partial": "alerts"}).content.decode()
    alert = find(bar, "a", data_tool="workspace_jobs.search")
    assert alert.text == "workspace_jobs.search 50 % of 8 calls"


def test_it_shows_what_a_suggested_limit_does_to_the_recorded_calls(editor_client: Client) -> None:
    load_sample_into_draft()
    tool = "workspace_jobs.search"
    events_ingest([finished(tool, f"s{i}", 300.0 if i < 20 else 900.0) for i in range(30)])
    events_ingest([timed_out(tool, f"x{i}", 2000) for i in range(10)])
    editor = editor_client.get(
        "/policy/agents/main/connections/0/tools/search/", {"timeout_s": "4"}
    ).content.decode()
    panel = find(editor, "div", id="tool-health").attrs["hx-get"]
    assert panel == f"/live/tools/main/{tool}/?partial=panel&timeout_s=4"
    url = f"/live/tools/main/{tool}/"
    tight = editor_client.get(url, {"partial": "panel", "timeout_s": "0.5"}).content.decode()
    said = text_of(tight, "p", id="proposed-impact")
    assert said.startswith("With timeout_s: 0.5")
    assert ", 10 of the 30 finished calls" in said  # the 900 ms ones
    assert "would have timed out" in said
    roomy = editor_client.get(url, {"partial": "panel", "timeout_s": "4"}).content.decode()
    said = text_of(roomy, "p", id="proposed-impact")
    assert said.startswith("With timeout_s: 4, 0 of the 30 finished calls")
    assert said.endswith("; 10 timed out at the limit in force.")


def test_it_fills_in_only_suggestions_the_form_would_accept(editor_client: Client) -> None:
    load_sample_into_draft()
    url = "/policy/agents/main/connections/0/tools/export_report/"
    page = editor_client.get(url, {"mode": "async_job", "retry": "natural_key"}).content.decode()
    assert find(page, "select", name="mode").value == "async_job"
    assert find(page, "select", name="retry").value == "natural_key"
    assert "Filled in from tool health advice" in text_of(page, id="suggested-note")
    bogus = editor_client.get(url, {"mode": "later", "timeout_s": "-3"}).content.decode()
    assert not find_all(bogus, id="suggested-note")
    assert find(bogus, "input", name="timeout_s").value == "20"  # the draft's own value


def test_the_tools_table_says_each_advice_in_words_and_writes_a_rate_one_way(
    viewer_client: Client,
) -> None:
    load_sample_into_draft()
    tool = "workspace_jobs.search"  # timeout_s 2: 4 of 60 calls cut off at the limit
    events_ingest([finished(tool, f"s{i}", 300.0) for i in range(56)])
    events_ingest([timed_out(tool, f"x{i}", 2000) for i in range(4)])
    table = viewer_client.get("/live/tools/", {"agent": "main"}).content.decode()
    [row] = find_all(table, "tr", data_tool=tool)
    advice = row.find("td", class_="advice-cell").text
    # Keyboard and touch users never see a title: the short form is text beside the rule id.
    assert "timeout-too-tight Timeout too tight: calls are cut off at the limit" in advice
    assert row.find("td", data_col="timeout_rate").text == "6.7 %"
    page = viewer_client.get(f"/live/tools/main/{tool}/").content.decode()
    assert "4 (6.7 %)" in [dd.text for dd in find_all(page, "dd")]
    advice = find(page, "ul", class_="advice").find("li", data_code="timeout-too-tight").text
    assert "4 of 60 calls timed out (6.7 %, above 5 %)" in advice


def test_the_chart_marks_a_timeout_rate_of_one_point(viewer_client: Client) -> None:
    load_sample_into_draft()
    tool = "workspace_jobs.search"
    events_ingest([finished(tool, f"s{i}", 300.0) for i in range(3)])
    events_ingest([timed_out(tool, "x0", 2000)])
    page = viewer_client.get(f"/live/tools/main/{tool}/", {"window": "24h"}).content.decode()
    [line] = find_all(page, "polyline", class_="series-timeout")
    assert len(line.attrs["points"].split()) == 1  # a one-point polyline draws nothing...
    [dot] = find_all(page, "circle", class_="dot-timeout")  # ...so the point has a marker
    assert dot.find("title").text.endswith("1 of 4 calls timed out (25 %)")
