"""The inputs that once broke Traitdeck each get a clear refusal, and every page keeps working.

An event is refused by its index inside a 200 answer (DESIGN §4's batch contract: the rest of the
batch is stored); everything else is a 4xx (a YAML diagnostic, an API 422, a form error).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIRequest
from django.http import QueryDict
from django.test import Client
from django.utils.datastructures import MultiValueDict

from observe.models import Event, Round
from policy import cli
from policy.models import AgentManifest
from policy.selectors import draft_state
from tests.hardening.pages import agent_pages, assert_every_page_works, assert_pages_work
from tests.markup import assert_alert, find_all, page_text
from tests.observe.ingest_support import (
    event,
    load_sample_into_draft,
    post_events,
    simulated_rounds,
    started,
    token,
)

pytestmark = pytest.mark.django_db

LONE = "\ud800"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def admin(admin_client: Client) -> Client:
    """A superuser's session over an instance with the sample policy and two stored rounds."""
    load_sample_into_draft()
    writer = token("events:write")
    for batch in simulated_rounds(2):
        assert post_events(Client(), batch, writer).json()["rejected"] == []
    return admin_client


@pytest.fixture
def writer() -> str:
    return token("events:write")


def history(client: Client) -> Any:
    response = client.get("/api/v1/rounds?limit=500")
    assert response.status_code == 200
    return response.json()


def observed(**fields: Any) -> dict[str, Any]:
    defaults = {"action_index": 0, "action": "call_tool", "tool_id": "workspace_jobs.search"}
    return event("action.observed", **{**defaults, "params": {"q": "x"}, **fields})


def assert_rejected_alone(response: Any, index: int, reason: str, accepted: int) -> None:
    """A 200 whose only rejection is the event at ``index`` (its reason names ``reason``)."""
    assert response.status_code == 200, response.content
    answer = response.json()
    assert [item["index"] for item in answer["rejected"]] == [index]
    assert reason in answer["rejected"][0]["error"]
    assert answer["accepted"] == accepted


# --- (a) a lone surrogate in an event --------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        started(turn_id=f"t{LONE}"),
        started(agent=f"main{LONE}"),
        observed(tool_id=f"workspace_jobs.search{LONE}", turn_id="t-surrogate"),
    ],
    ids=["turn_id", "agent", "tool_id"],
)
def test_an_event_with_a_lone_surrogate_is_rejected_by_index_and_the_rest_is_stored(
    admin: Client, writer: str, bad: dict[str, Any]
) -> None:
    good = [started(turn_id="t-surrogate"), observed(turn_id="t-surrogate", action_index=1)]
    # json.dumps writes the lone surrogate as the escape "\ud800": valid JSON text.
    response = post_events(Client(), [good[0], bad, good[1]], writer)
    assert_rejected_alone(response, 1, "cannot be encoded as UTF-8", accepted=2)
    assert Event.objects.filter(event_id__in=[e["event_id"] for e in good]).count() == 2
    assert not Event.objects.filter(event_id=bad["event_id"]).exists()
    assert Round.objects.filter(turn_id="t-surrogate").exists()
    assert_every_page_works(admin)


# --- (b) a lone surrogate in an agent key or a connection alias ------------------------------

YAML_AGENT_KEY = 'surfaces: {as_consumer: {agents: {"main\\ud800": {tools: []}}}}\n'
YAML_ALIAS = (
    "surfaces: {as_consumer: {agents: {main: {tools: ["
    '{kind: python, module: m, alias: "jobs\\ud800", allowed: [a]}]}}}}\n'
)


@pytest.mark.parametrize("text", [YAML_AGENT_KEY, YAML_ALIAS], ids=["agent-key", "alias"])
def test_yaml_with_a_lone_surrogate_is_refused_with_text_encoding(
    admin: Client, text: str, tmp_path: Path
) -> None:
    before = draft_state()
    validate = admin.post("/api/v1/policy/validate", data=text, content_type="application/yaml")
    assert validate.status_code == 200
    assert "text-encoding" in [d["code"] for d in validate.json()["diagnostics"]]
    for dry_run in ("true", "false"):
        response = admin.post(
            f"/api/v1/policy/import?dry_run={dry_run}", data=text, content_type="application/yaml"
        )
        assert response.status_code == 422, response.content
        assert "text-encoding" in [d["code"] for d in response.json()["diagnostics"]]
    page = admin.post("/policy/import/", {"text": text, "op": "apply"})
    assert page.status_code == 422
    assert "text-encoding" in [
        d.attrs["data-code"] for d in find_all(page.content.decode(), "li", data_code=None)
    ]
    # The CI command says the same, without a server.
    file = tmp_path / "policy.yaml"
    file.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    assert cli.run(["validate", str(file), "--format", "json"], out, err) == 1
    assert "text-encoding" in [d["code"] for d in json.loads(out.getvalue())["diagnostics"]]
    assert draft_state().revision == before.revision
    assert_pages_work(admin, ["/policy/", "/api/v1/agents", *agent_pages("main")])
    assert_every_page_works(admin)


def test_the_api_refuses_a_lone_surrogate_in_an_agent_name_or_alias_with_422(
    admin: Client,
) -> None:
    before = draft_state()
    writes = [
        ("post", "/api/v1/agents", {"name": f"a{LONE}"}),
        ("patch", "/api/v1/agents/main", {"name": f"main{LONE}"}),
        ("patch", "/api/v1/agents/main/connections/0", {"alias": f"jobs{LONE}"}),
        ("post", "/api/v1/agents/main/connections", {"kind": "mcp", "alias": f"b{LONE}"}),
        ("put", "/api/v1/agents/main/manifest", {f"x.{LONE}": {"strategy": ["neutral"]}}),
    ]
    for method, url, body in writes:
        response = getattr(admin, method)(
            url, data=json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 422, (url, response.content)
        assert "UTF-8" in response.json()["error"]
    assert draft_state().revision == before.revision
    assert not AgentManifest.objects.exists()
    assert_pages_work(admin, ["/policy/", "/api/v1/agents", *agent_pages("main")])
    assert_every_page_works(admin)


@pytest.fixture
def form_fields(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The next form POST's fields exactly as given, lone surrogates included. Django decodes a
    form body with "replace" (and refuses non-UTF-8 charsets), so no client reaches a form with
    one today: this stands in for any decoder that lets one through, so that the refusal does
    not hang on Django's decoding alone."""
    fields: dict[str, Any] = {}

    def load(request: WSGIRequest) -> None:
        data = QueryDict(mutable=True)
        for name, value in fields.items():
            data.setlist(name, value if isinstance(value, list) else [value])
        request._post = data  # type: ignore[attr-defined]
        request._files = MultiValueDict()  # type: ignore[attr-defined]

    monkeypatch.setattr(WSGIRequest, "_load_post_and_files", load)
    return fields


def test_the_editor_forms_refuse_a_lone_surrogate_with_a_form_error(
    admin: Client, form_fields: dict[str, Any]
) -> None:
    before = draft_state()
    alias_form = {"kind": "python", "module": "m", "alias": f"jobs{LONE}", "allowed": "search"}
    posts = [
        ("/policy/agents/add/", {"name": f"a{LONE}"}),
        ("/policy/agents/main/rename/", {"name": f"main{LONE}"}),
        ("/policy/agents/main/connections/0/edit/", alias_form),
        ("/policy/agents/main/connections/new/", alias_form),
    ]
    for url, fields in posts:
        form_fields.clear()
        form_fields.update(fields, base_revision=str(before.revision))
        response = admin.post(url, data=b"-", content_type="application/x-www-form-urlencoded")
        assert response.status_code == 422, (url, response.status_code)
        assert "Not saved" in page_text(response.content.decode()), url
    assert draft_state().revision == before.revision
    form_fields.clear()
    assert_pages_work(admin, ["/policy/", "/api/v1/agents", *agent_pages("main")])
    assert_every_page_works(admin)


def test_a_surrogate_sent_as_utf8_bytes_to_a_form_is_never_stored_as_a_surrogate(
    admin: Client,
) -> None:
    # "\ud800" encoded the lenient way ("surrogatepass"): the bytes ED A0 80, not UTF-8.
    response = admin.post(
        "/policy/agents/add/",
        data=f"name=a%ED%A0%80&base_revision={draft_state().revision}",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code in {200, 302, 422}
    assert all(name.encode() for name in draft_state().agents)
    assert_every_page_works(admin)


# --- (c) a timestamp in year 9999 ------------------------------------------------------------


@pytest.mark.parametrize("ts", ["9999-12-31T23:59:59Z", "9999-01-01T00:00:00.000+00:00"])
def test_an_event_from_year_9999_is_rejected_by_index_and_history_is_unaffected(
    admin: Client, writer: str, ts: str
) -> None:
    before = history(admin)
    history_page = admin.get("/live/history/")
    batch = [started(turn_id="future", ts=ts), started(turn_id="now-ish")]
    assert_rejected_alone(post_events(Client(), batch, writer), 0, "in the future", accepted=1)
    assert not Round.objects.filter(turn_id="future").exists()
    after = history(admin)
    # The rounds that were there keep their order and content; the valid event's round joins.
    assert [r for r in after["rounds"] if r["turn_id"] != "now-ish"] == before["rounds"]
    assert len(after["rounds"]) == len(before["rounds"]) + 1
    assert admin.get("/live/history/").status_code == history_page.status_code == 200
    assert_every_page_works(admin)


# --- (d) a turn_id that climbs out of the round's address ------------------------------------


@pytest.mark.parametrize(
    "turn_id", ["../../../policy/agents/main", "a/../../b", "..", "x/%2e%2e/y", "..\\..\\policy"]
)
def test_a_turn_id_with_dot_segments_is_rejected_by_index(
    admin: Client, writer: str, turn_id: str
) -> None:
    batch = [started(turn_id="fine"), started(turn_id=turn_id)]
    assert_rejected_alone(post_events(Client(), batch, writer), 1, "path segment", accepted=1)
    assert not Round.objects.filter(turn_id=turn_id).exists()
    assert_every_page_works(admin)


# --- (e) a namespace row count that is a digit to isdigit() but not to int() -----------------


@pytest.mark.parametrize("count", ["²", "١", "-1", "1e3", ""])
def test_a_named_service_form_with_a_bad_row_count_is_a_form_error(
    admin: Client, count: str
) -> None:
    before = draft_state()
    response = admin.post(
        "/policy/agents/main/connections/new/",
        {
            "kind": "named_service",
            "base_revision": before.revision,
            "alias": "ns",
            "ns-count": count,
            "ns-0-name": "task",
            "ns-0-ops": ["object.search"],
        },
        **HTMX,
    )
    assert response.status_code == 422, response.status_code
    assert_alert(response.content.decode(), "row count must be a whole number")
    assert draft_state().revision == before.revision
    assert_every_page_works(admin)
