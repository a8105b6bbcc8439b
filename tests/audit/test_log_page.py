"""The audit log page, its CSV export and ``GET /api/v1/audit``: one filter, three outputs."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEntry
from audit.services import audit_record
from tests.audit.conftest import seed
from tests.markup import find, find_all, first_element, is_fragment, text_of

pytestmark = pytest.mark.django_db

LOG = "/audit/"
CSV = "/audit/export.csv"
API = "/api/v1/audit"


def entry(actor: str, action: str, *, hours_ago: float = 0, **fields: Any) -> AuditEntry:
    made = audit_record(actor=actor, action=action, **fields)
    # ``at`` is set on insert; move it back in time for the time filters.
    AuditEntry.objects.filter(pk=made.pk).update(at=timezone.now() - timedelta(hours=hours_ago))
    made.refresh_from_db()
    return made


@pytest.fixture
def log(db: None) -> list[AuditEntry]:
    return [
        entry("ana", "tool.edit", hours_ago=72, target="tool main · jobs.search"),
        entry("cli", "token.create", hours_ago=30, target="token sim", ref={"token": "sim"}),
        entry("ben", "policy.publish", hours_ago=2, target="version 3", message="ship it"),
        entry("ana", "token.revoke", hours_ago=1, target="token sim", ref={"token": "sim"}),
    ]


def targets(client: Client, query: str = "") -> list[str]:
    data = client.get(API + query).json()
    return [item["target"] + "/" + item["action"] for item in data["entries"]]


def csv_rows(response: Any) -> list[list[str]]:
    body = b"".join(response.streaming_content).decode("utf-8")
    return list(csv.reader(io.StringIO(body, newline="")))


# --- who may read it --------------------------------------------------------------------------


@pytest.mark.parametrize("url", [LOG, CSV, API])
def test_publishers_read_the_log_and_editors_do_not(
    url: str, publisher_client: Client, editor_client: Client
) -> None:
    assert publisher_client.get(url).status_code == 200
    assert editor_client.get(url).status_code == 403


# --- the page ----------------------------------------------------------------------------------


def test_the_page_lists_newest_first_with_links(
    publisher_client: Client, log: list[AuditEntry]
) -> None:
    html = publisher_client.get(LOG).content.decode()
    shown = [row.attrs["id"] for row in find_all(html, "tr", class_="audit-row")]
    assert shown == [f"audit-entry-{e.pk}" for e in reversed(log)]
    links = find(html, "table", id="audit-entries").find_all("a")
    assert {"/tokens/", "/policy/versions/3/"} <= {link.attrs["href"] for link in links}
    assert "ship it" in text_of(html, "table", id="audit-entries")


def test_the_page_links_an_agent_only_while_it_exists(publisher_client: Client) -> None:
    seed(main={"tools": []})
    entry("ana", "agent.add", target="agent main", ref={"agent": "main"})
    entry("ana", "agent.remove", target="agent gone", ref={"agent": "gone"})
    html = publisher_client.get(LOG).content.decode()
    entries = find(html, "table", id="audit-entries")
    assert entries.find("a", href="/policy/agents/main/").text == "agent main"
    assert not entries.find_all("a", href="/policy/agents/gone/")
    assert "agent gone" in entries.text  # named, not linked


def test_an_entry_expands_to_a_diff_of_before_and_after(publisher_client: Client) -> None:
    entry(
        "ana",
        "tool.edit",
        before={"traits": {"strategy": ["exploration"]}},
        after={"traits": {"strategy": ["neutral"]}},
    )
    html = publisher_client.get(LOG).content.decode()
    diff = find(html, "details", class_="audit-change").find("pre", class_="diff")
    assert [line.raw_text for line in diff.find_all("span", class_="del")] == [
        '-      "exploration"'
    ]
    assert [line.raw_text for line in diff.find_all("span", class_="add")] == ['+      "neutral"']


def test_the_page_filters_and_keeps_the_filter_in_the_csv_link(
    publisher_client: Client, log: list[AuditEntry]
) -> None:
    html = publisher_client.get(LOG, {"user": "ana", "since": "7d"}).content.decode()
    assert find_all(html, "tr", id=f"audit-entry-{log[0].pk}")
    assert not find_all(html, "tr", id=f"audit-entry-{log[2].pk}")
    assert find(html, "a", id="audit-csv").attrs["href"] == "/audit/export.csv?user=ana&since=7d"


def test_an_htmx_search_answers_with_the_results_only(
    publisher_client: Client, log: list[AuditEntry]
) -> None:
    response = publisher_client.get(LOG, {"action": "token."}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert is_fragment(html)
    results = first_element(html)
    assert results.matches("section", {"id": "audit-results"})
    assert results.find("p", class_="muted").text.startswith("2 entries ·")


def test_a_filter_value_it_cannot_read_is_named_and_left_out(
    publisher_client: Client, log: list[AuditEntry]
) -> None:
    response = publisher_client.get(LOG, {"since": "last week"})
    assert response.status_code == 200
    html = response.content.decode()
    [error] = find(html, "ul", class_="messages").find_all("li", class_="error")
    assert "since must be an ISO 8601 date or date-time" in error.text
    assert (
        find(html, "section", id="audit-results")
        .find("p", class_="muted")
        .text.startswith("4 entries ·")
    )


def test_the_page_is_paginated(publisher_client: Client) -> None:
    for n in range(55):
        audit_record(actor="ana", action="draft.edit", target=f"policy {n}")
    first = publisher_client.get(LOG).content.decode()
    assert len(find_all(first, "tr", class_="audit-row")) == 50
    older = find(first, "a", id="older", rel="next")
    assert (older.attrs["href"], older.text) == ("?page=2", "Older entries")
    second = publisher_client.get(LOG, {"page": "2"}).content.decode()
    assert len(find_all(second, "tr", class_="audit-row")) == 5
    assert not find_all(second, "a", id="older")


# --- CSV -----------------------------------------------------------------------------------------


def test_the_csv_holds_every_matching_entry_with_its_headers(
    publisher_client: Client, log: list[AuditEntry]
) -> None:
    response = publisher_client.get(CSV, {"action": "token."})
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="traitdeck-audit-')
    rows = csv_rows(response)
    assert rows[0] == ["at", "actor", "action", "target", "message", "before", "after"]
    assert [(r[1], r[2], r[3]) for r in rows[1:]] == [
        ("ana", "token.revoke", "token sim"),
        ("cli", "token.create", "token sim"),
    ]
    assert rows[1][0] == log[3].at.isoformat()


def test_the_csv_bytes_are_crlf_lines_with_json_cells(publisher_client: Client) -> None:
    made = audit_record(actor="ana", action="tool.edit", before=None, after={"a": [1, "x"]})
    body = b"".join(publisher_client.get(CSV).streaming_content)
    assert body == (
        b"at,actor,action,target,message,before,after\r\n"
        + f'{made.at.isoformat()},ana,tool.edit,,,,"{{""a"": [1, ""x""]}}"\r\n'.encode()
    )


def test_the_csv_keeps_formulas_as_text(publisher_client: Client) -> None:
    audit_record(actor="=HYPERLINK(1)", action="draft.edit", message="+SUM(A1)")
    row = csv_rows(publisher_client.get(CSV))[1]
    assert row[1] == "'=HYPERLINK(1)"
    assert row[4] == "'+SUM(A1)"


def test_the_csv_refuses_a_filter_it_cannot_read(publisher_client: Client) -> None:
    response = publisher_client.get(CSV, {"until": "soon"})
    assert response.status_code == 400
    assert b"until must be" in response.content  # raw: a text/plain refusal


# --- JSON API ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ["token sim/token.revoke", "version 3/policy.publish", "token sim/token.create",
              "tool main · jobs.search/tool.edit"]),
        ("?user=ana", ["token sim/token.revoke", "tool main · jobs.search/tool.edit"]),
        ("?action=token.create", ["token sim/token.create"]),
        ("?action=token.", ["token sim/token.revoke", "token sim/token.create"]),
        ("?action=publish", ["version 3/policy.publish"]),
        ("?action=EDIT", ["tool main · jobs.search/tool.edit"]),
        ("?since=24h", ["token sim/token.revoke", "version 3/policy.publish"]),
        ("?until=24h", ["token sim/token.create", "tool main · jobs.search/tool.edit"]),
        ("?since=48h&until=90m", ["version 3/policy.publish", "token sim/token.create"]),
        ("?user=nobody", []),
    ],
)  # fmt: skip
def test_the_api_filters_by_user_action_and_time(
    publisher_client: Client, log: list[AuditEntry], query: str, expected: list[str]
) -> None:
    assert targets(publisher_client, query) == expected


def test_the_api_gives_before_after_and_pages(publisher_client: Client) -> None:
    for n in range(3):
        audit_record(actor="ana", action="tool.edit", before={"n": n}, after={"n": n + 1})
    data = publisher_client.get(API, {"limit": 2, "page": 2}).json()
    assert (data["count"], data["page"], data["pages"]) == (3, 2, 2)
    (only,) = data["entries"]
    assert (only["before"], only["after"], only["actor"]) == ({"n": 0}, {"n": 1}, "ana")


@pytest.mark.parametrize("query", ["?since=tomorrow", "?limit=0", "?limit=501", "?page=0"])
def test_the_api_refuses_bad_values_with_422(publisher_client: Client, query: str) -> None:
    response = publisher_client.get(API + query)
    assert response.status_code == 422
    assert "error" in response.json()


def test_the_api_needs_a_login(client: Client) -> None:
    assert client.get(API).status_code == 401
