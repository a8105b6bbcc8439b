"""Findings of the attack probe of 2026-12-02, each one replayed: the refusal is clear, nothing of
it is stored, and every page keeps working."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEntry
from tests.hardening.pages import assert_every_page_works
from tests.markup import find_all
from tests.observe.ingest_support import event, load_sample_into_draft, post_events, started, token

pytestmark = pytest.mark.django_db

JSON = "application/json"
HUGE = int("1" + "0" * 400)


@pytest.fixture
def admin(admin_client: Client) -> Client:
    load_sample_into_draft()
    return admin_client


def stored(client: Client) -> tuple[int, str]:
    """What a refused write must leave unchanged: the audit log and the draft."""
    return AuditEntry.objects.count(), client.get("/api/v1/policy/export.yaml").content.decode()


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        (
            "post",
            "/api/v1/agents/main/connections",
            {"kind": "mcp", "server_id": "big", "tool_execution": {"s": {"timeout_s": HUGE}}},
        ),
        (
            "patch",
            "/api/v1/agents/main/connections/0",
            {"tool_execution": {"s": {"timeout_s": HUGE}}},
        ),
    ],
)
def test_it_refuses_a_huge_number_in_an_edit_and_stores_nothing(
    admin: Client, method: str, url: str, body: dict[str, Any]
) -> None:
    before = stored(admin)
    response = getattr(admin, method)(url, data=json.dumps(body), content_type=JSON)
    assert response.status_code in (400, 422), response.content[:300]
    assert "digits" in response.json()["error"]
    assert stored(admin) == before
    assert_every_page_works(admin)


@pytest.mark.parametrize(
    "number",
    [
        "0b1" + "0" * 2000,
        ":".join(["59"] * 400),
        "1" + "0" * 400,
        "0x" + "f" * 500,
        "0" + "7" * 900,
        "-" + "9" * 19,
    ],
)
def test_validate_and_import_preview_report_a_huge_yaml_number(admin: Client, number: str) -> None:
    text = (
        "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools:\n"
        "        - {kind: mcp, server_id: s, tool_execution: {t: {timeout_s: " + number + "}}}\n"
    )
    for url in ("/api/v1/policy/validate", "/api/v1/policy/import?dry_run=true"):
        response = admin.post(url, data=text, content_type="application/yaml")
        assert response.status_code in (200, 422), (url, response.content[:300])
        codes = {d["code"] for d in response.json()["diagnostics"]}
        assert "number-too-large" in codes, (url, codes)
    preview = admin.post("/policy/import/", {"text": text, "op": "preview"})
    assert preview.status_code in (200, 422)
    assert "number-too-large" in [
        d.attrs["data-code"] for d in find_all(preview.content.decode(), "li", data_code=None)
    ]


LONG = "9" * 5000


@pytest.mark.parametrize(
    "url",
    [
        f"/policy/diff/?from={LONG}",
        f"/policy/diff/?to={LONG}",
        f"/api/v1/versions/diff?from={LONG}",
        f"/api/v1/versions/diff?to={LONG}",
        f"/policy/impact/?limit={LONG}",
        f"/policy/impact/?chunk={LONG}",
        f"/policy/impact/?baseline={LONG}",
        f"/api/v1/versions/{LONG}",
        f"/policy/versions/{LONG}/",
        f"/api/v1/rounds?limit={LONG}",
        f"/live/history/?limit={LONG}",
    ],
)
def test_a_huge_number_in_a_query_is_a_refusal_not_a_500(admin: Client, url: str) -> None:
    response = admin.get(url)
    assert 400 <= response.status_code < 500 or response.status_code == 200, response.status_code


def test_a_huge_namespace_row_count_is_a_form_error(admin: Client) -> None:
    response = admin.post(
        "/policy/agents/main/connections/add/",
        {"kind": "named_service", "alias": "svc", "ns-count": LONG},
    )
    assert response.status_code < 500


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        (
            "turn_id",
            "nl\nturn",
            "turn_id must not contain control characters (U+000A at position 2)",
        ),
        ("turn_id", "tab\tturn", "U+0009"),
        ("agent", "a\x7fb", "agent must not contain control characters (U+007F"),
        ("agent", ".", "agent must not be '.'"),
        ("agent", "..", "agent must not be '..'"),
        ("turn_id", "..", "turn_id must not"),
    ],
)
def test_ingest_refuses_an_id_no_page_can_show_by_index_with_the_reason(
    field: str, value: str, reason: str
) -> None:
    batch = [started(turn_id="ok-1"), started(**{field: value})]
    answer = post_events(Client(), batch, token("events:write")).json()
    assert answer["accepted"] == 1
    assert [r["index"] for r in answer["rejected"]] == [1]
    assert reason in answer["rejected"][0]["error"]


def test_ingest_refuses_a_control_character_in_a_tool_id() -> None:
    batch = [
        started(turn_id="t"),
        event(
            "action.observed",
            turn_id="t",
            action_index=0,
            action="call_tool",
            tool_id="web\rsearch",
            params={},
        ),
    ]
    answer = post_events(Client(), batch, token("events:write")).json()
    assert [r["index"] for r in answer["rejected"]] == [1]
    assert "tool_id must not contain control characters" in answer["rejected"][0]["error"]


def test_a_stored_round_whose_ids_no_url_can_hold_still_renders_everywhere(
    admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds stored before ingest refused such ids (or by any other way in) must not break the
    pages and API reads that link to them: their links carry the ids quoted, in a query."""
    from observe.domain import events, storable

    monkeypatch.setattr(events, "_identifier", lambda value, name: value)
    monkeypatch.setattr(storable, "dot_segment", lambda text: False)
    writer = token("events:write")
    for agent, turn in (("main", "nl\nturn"), ("main", "../../policy"), ("..", "t"), (".", "t2")):
        answer = post_events(Client(), [started(agent=agent, turn_id=turn)], writer).json()
        assert answer["accepted"] == 1, answer
    monkeypatch.undo()
    rounds = admin.get("/api/v1/rounds")
    assert rounds.status_code == 200
    urls = {(r["agent"], r["turn_id"]): r["url"] for r in rounds.json()["rounds"]}
    for url in urls.values():
        assert url
        assert admin.get(url).status_code == 200, url
    for page in ("/policy/impact/", "/policy/publish/", "/live/history/", "/"):
        assert admin.get(page).status_code == 200, page
    impact = admin.post("/api/v1/policy/impact", data='{"baseline": "draft"}', content_type=JSON)
    assert impact.status_code == 200
    assert_every_page_works(admin)


def test_a_manifest_put_of_the_same_content_changes_nothing(admin: Client) -> None:
    manifest = {"jobs.search": {"tool_traits": {"strategy": ["exploration"]}}}
    url = "/api/v1/agents/main/manifest"
    first = admin.put(url, data=json.dumps(manifest), content_type=JSON)
    assert first.status_code == 200, first.content
    before = stored(admin), first.json()["revision"]
    again = admin.put(url, data=json.dumps(manifest), content_type=JSON)
    assert again.status_code == 200
    assert (stored(admin), again.json()["revision"]) == before
    changed = admin.put(url, data=json.dumps({"jobs.search": {}}), content_type=JSON)
    assert changed.json()["revision"] == before[1] + 1


def served(client: Client, method: str, path: str) -> Any:
    """The response as daphne would send it: Django's handler and middleware, without the test
    client's own removal of HEAD bodies."""
    from django.core.handlers.base import BaseHandler
    from django.test import RequestFactory

    handler = BaseHandler()
    handler.load_middleware()
    request = getattr(RequestFactory(), method)(path)
    request.COOKIES.update({k: v.value for k, v in client.cookies.items()})
    return handler.get_response(request)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/health",
        "/api/openapi.json",
        "/api/v1/agents",
        "/api/v1/rounds/export.jsonl",
        "/policy/",
        "/live/history/",
        "/policy/export.yaml",
        "/accounts/login/",
    ],
)
def test_head_answers_like_get_without_a_body(admin: Client, path: str) -> None:
    get = served(admin, "get", path)
    head = served(admin, "head", path)
    assert head.status_code == get.status_code == 200
    assert head["Content-Type"] == get["Content-Type"]
    body = b"".join(head) if head.streaming else head.content
    assert body == b""
    if not get.streaming:
        assert head["Content-Length"] == str(len(get.content))
