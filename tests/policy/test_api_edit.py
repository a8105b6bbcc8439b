"""The policy editing API: agents, connections, a tool's traits and manifests through JSON, every
status of DESIGN §6, and that an edit made here leaves the same draft as the browser's forms.

Over 500 lines: one file per API router, as the routes share their fixtures and the comparison
with the forms (split by resource it would repeat them)."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.vocabulary import EARLY_PROFILE
from policy.api_edit_schemas import DesignIn, ExecutionIn
from policy.domain.edits import DESIGN_FIELDS
from policy.models import AgentManifest
from policy.selectors import draft_state
from policy.services import draft_replace, manifest_upload
from tests.policy.conftest import exported_agents as stored_agents
from tests.policy.conftest import exported_connections as stored_connections
from tests.policy.conftest import seed_agents as seed

pytestmark = pytest.mark.django_db

AGENTS = "/api/v1/agents"
MAIN = f"{AGENTS}/main"
CONNECTIONS = f"{MAIN}/connections"
JSON = "application/json"

JOBS = {
    "kind": "python",
    "module": "pkg.jobs",
    "alias": "jobs",
    "allowed": ["search", "launch"],
    "discovery": {"mode": "eager"},
    "tool_traits": {"search": {"strategy": ["exploration"], "x-owner": "search-team"}},
}
BROWSER = {"kind": "mcp", "server_id": "browser", "alias": "browser", "allowed": ["open_page"]}
SERVICE = {
    "kind": "named_service",
    "alias": "svc",
    "namespaces": {"task": {"allowed": ["object.get"]}},
}


def call(
    client: Client,
    method: str,
    url: str,
    body: Any = None,
    *,
    if_match: str | None = None,
    content_type: str = JSON,
) -> Any:
    headers = {"If-Match": if_match} if if_match is not None else {}
    if body is None:
        return client.generic(method.upper(), url, headers=headers)
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.generic(method.upper(), url, data, content_type=content_type, headers=headers)


def codes(found: list[dict[str, Any]]) -> list[str]:
    return [d["code"] for d in found]


@pytest.fixture
def api(admin_client: Client) -> Client:
    return admin_client


@pytest.fixture
def seeded(api: Client) -> Client:
    """``main`` with a python and an mcp connection and a manifest; ``quiet`` with nothing."""
    seed(main={"tools": [JOBS, BROWSER]}, quiet={"tools": []})
    manifest_upload(agent="main", data={"jobs.search": {"tool_traits": {}}})
    return api


# --- agents ------------------------------------------------------------------------------------


def test_it_lists_agents_with_the_counts_of_the_agents_page(api: Client) -> None:
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
    response = api.get(AGENTS)
    assert response.status_code == 200
    body = response.json()
    assert body["revision"] == draft_state().revision
    main, quiet = body["agents"]
    # The same figures the agents page shows for this draft (test_views_agents).
    assert main == {
        "name": "main",
        "url": "/policy/agents/main/",
        "connections": 3,
        "tools": 3,
        # The python connection without module/ref is a warning: the bundle's code may read it.
        "errors": 0,
        "warnings": 4,
    }
    assert (quiet["name"], quiet["errors"], quiet["warnings"]) == ("quiet", 0, 0)


def test_it_adds_an_agent_with_201_and_the_new_revision(api: Client) -> None:
    response = call(api, "post", AGENTS, {"name": " support "})
    assert response.status_code == 201
    assert response.json() == {
        "revision": 1,
        "agent": {
            "name": "support",
            "url": "/policy/agents/support/",
            "connections": 0,
            "tools": 0,
            "errors": 0,
            "warnings": 0,
        },
    }
    assert stored_agents() == {"support": {"tools": []}}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "main"}, "An agent named 'main' already exists."),
        ({"name": "no spaces"}, "An agent name is 1–100 letters"),
        ({"name": ""}, "An agent name is 1–100 letters"),
    ],
)
def test_it_refuses_a_taken_or_bad_agent_name_with_422(
    seeded: Client, body: dict[str, Any], message: str
) -> None:
    before = draft_state()
    response = call(seeded, "post", AGENTS, body)
    assert response.status_code == 422
    assert response.json()["error"].startswith(message)
    assert draft_state() == before


def test_renaming_an_agent_takes_its_manifest_along(seeded: Client) -> None:
    response = call(seeded, "patch", MAIN, {"name": "core"})
    assert response.status_code == 200
    body = response.json()
    assert body["agent"]["name"] == "core"
    assert body["agent"]["connections"] == 2
    assert list(stored_agents()) == ["core", "quiet"]  # keeps its place
    assert list(AgentManifest.objects.values_list("agent", flat=True)) == ["core"]


def test_removing_an_agent_removes_its_manifest(seeded: Client) -> None:
    response = call(seeded, "delete", MAIN)
    assert response.status_code == 200
    assert response.json() == {"revision": draft_state().revision, "removed": {"name": "main"}}
    assert list(stored_agents()) == ["quiet"]
    assert not AgentManifest.objects.exists()


# --- connections -------------------------------------------------------------------------------


def test_it_lists_connections_as_stored_with_their_diagnostics(api: Client) -> None:
    seed(
        main={
            "tools": [
                {**JOBS, "added": datetime.date(2026, 1, 2)},
                "not a mapping",
                {"kind": "python", "alias": "broken"},
            ]
        }
    )
    response = api.get(CONNECTIONS)
    assert response.status_code == 200
    body = response.json()
    assert body["revision"] == draft_state().revision
    jobs, broken = body["connections"]
    assert (jobs["index"], jobs["kind"], jobs["alias"], jobs["problem"]) == (
        0,
        "python",
        "jobs",
        None,
    )
    # The raw mapping, unknown keys included; a YAML date becomes text.
    assert jobs["connection"] == {**JOBS, "added": "2026-01-02"}
    assert [(t["name"], t["id"], t["key"]) for t in jobs["tools"]] == [
        ("search", "jobs.search", "search"),
        ("launch", "jobs.launch", "launch"),
    ]
    search, launch = jobs["tools"]
    assert codes(search["diagnostics"]) == ["timeout-missing"]
    assert codes(launch["diagnostics"]) == ["strategy-unknown", "timeout-missing"]
    assert broken["index"] == 2  # the index in the stored list, past the item that is no mapping
    assert broken["problem"] == "a python connection needs module or ref"
    assert codes(broken["diagnostics"]) == ["connection-unloadable"]
    # The item that is no mapping has no connection of its own: its finding is the agent's.
    assert [(d["code"], d["path"]) for d in body["diagnostics"]] == [
        ("multi-action-off", "agents.main"),
        ("shape", "agents.main.tools[1]"),
    ]


def test_adding_a_connection_answers_201_with_its_index(seeded: Client) -> None:
    response = call(seeded, "post", CONNECTIONS, {"kind": "mcp", "server_id": "docs"})
    assert response.status_code == 201
    connection = response.json()["connection"]
    assert connection["index"] == 2
    assert connection["alias"] == "mcp_docs"
    assert stored_connections()[2] == {"kind": "mcp", "server_id": "docs"}


@pytest.mark.parametrize(
    "body",
    [["kind", "mcp"], "just text", 3, {"kind": "ftp"}, {"kind": ["mcp"]}],
    ids=["list", "string", "number", "unknown-kind", "kind-not-text"],
)
def test_a_connection_body_of_the_wrong_shape_is_422(seeded: Client, body: Any) -> None:
    before = draft_state()
    response = call(seeded, "post", CONNECTIONS, json.dumps(body))
    assert response.status_code == 422
    assert "error" in response.json()
    assert draft_state() == before


def test_patching_a_connection_keeps_its_other_keys(seeded: Client) -> None:
    response = call(
        seeded, "patch", f"{CONNECTIONS}/0", {"allowed": ["search"], "module": None, "ref": "j.py"}
    )
    assert response.status_code == 200
    saved = stored_connections()[0]
    assert saved["discovery"] == {"mode": "eager"}
    assert saved["tool_traits"] == JOBS["tool_traits"]
    assert "module" not in saved
    assert (saved["ref"], saved["allowed"]) == ("j.py", ["search"])
    assert response.json()["connection"]["connection"] == saved


def test_removing_a_connection_answers_with_what_was_removed(seeded: Client) -> None:
    response = call(seeded, "delete", f"{CONNECTIONS}/0")
    assert response.status_code == 200
    assert response.json()["removed"] == {"index": 0, "connection": JOBS}
    assert stored_connections() == [BROWSER]


def test_moving_a_connection_answers_with_it_at_its_new_index(seeded: Client) -> None:
    response = call(seeded, "post", f"{CONNECTIONS}/1/move", {"to": 0})
    assert response.status_code == 200
    assert response.json()["connection"]["index"] == 0
    assert response.json()["connection"]["alias"] == "browser"
    assert [c["alias"] for c in stored_connections()] == ["browser", "jobs"]


@pytest.mark.parametrize("body", [{"to": 2}, {"to": -1}, {"to": True}, {"to": "1"}, {}])
def test_a_move_out_of_range_or_not_an_index_is_422(seeded: Client, body: Any) -> None:
    before = draft_state()
    response = call(seeded, "post", f"{CONNECTIONS}/0/move", body)
    assert response.status_code == 422
    assert draft_state() == before


# --- one tool ----------------------------------------------------------------------------------

TOOL = f"{CONNECTIONS}/0/tools"


def test_early_start_on_an_exploration_tool_answers_execution_inert(seeded: Client) -> None:
    response = call(seeded, "put", f"{TOOL}/launch", {"strategy": ["exploration"], "early": True})
    assert response.status_code == 200
    tool = response.json()["tool"]
    assert "execution-inert" in codes(tool["diagnostics"])
    assert tool["traits"] == {"strategy": ["exploration"], "execution": EARLY_PROFILE}
    assert tool["effective"]["early"] is False
    assert stored_connections()[0]["tool_traits"]["launch"] == tool["traits"]


def test_a_neutral_early_tool_is_eligible_and_keeps_its_extension_keys(seeded: Client) -> None:
    body = {
        "strategy": ["neutral"],
        "early": True,
        "design": {"timeout_s": 20, "mode": "sync", "retry": "natural_key", "confirm": False},
    }
    response = call(seeded, "put", f"{TOOL}/search", body)
    assert response.status_code == 200
    tool = response.json()["tool"]
    assert "execution-inert" not in codes(tool["diagnostics"])
    assert tool["traits"] == {
        "strategy": ["neutral"],
        "x-owner": "search-team",
        "execution": EARLY_PROFILE,
    }
    # A whole-number timeout is written as an int, as the form writes it; confirm off is left out.
    assert tool["design"] == {"timeout_s": 20, "mode": "sync", "retry": "natural_key"}
    assert tool["effective"]["early"] is True
    assert tool["effective"]["provenance"]["strategy"].startswith("config ")
    assert seeded.get(f"{MAIN}/effective").json()["tools"]["jobs.search"] == tool["effective"]


def test_typed_execution_fields_are_written_when_early_start_is_off(seeded: Client) -> None:
    body = {"strategy": [], "early": False, "execution": {"trigger": " tool_call_complete "}}
    tool = call(seeded, "put", f"{TOOL}/search", body).json()["tool"]
    assert tool["traits"] == {
        "x-owner": "search-team",
        "execution": {"trigger": "tool_call_complete"},
    }


def test_a_namespace_override_is_written_in_its_namespace(seeded: Client) -> None:
    call(seeded, "post", CONNECTIONS, SERVICE)
    url = f"{CONNECTIONS}/2/tools/get_object"
    response = call(
        seeded, "put", url, {"strategy": ["exploitation"], "early": False, "namespace": "task"}
    )
    assert response.status_code == 200
    assert response.json()["tool"]["design"] is None
    assert stored_connections()[2]["namespaces"]["task"]["tool_traits"] == {
        "get_object": {"strategy": ["exploitation"]}
    }
    refused = call(
        seeded,
        "put",
        url,
        {"strategy": [], "early": False, "namespace": "task", "design": {"timeout_s": 3}},
    )
    assert refused.status_code == 422
    assert refused.json()["error"].startswith("A namespace override and the MCP wildcard")


@pytest.mark.parametrize(
    "body",
    [
        {"strategy": ["bogus"], "early": False},
        {"strategy": "neutral", "early": False},
        {"strategy": [], "early": "yes"},
        {"strategy": []},
        {"strategy": [], "early": False, "design": {"timeout_s": 0}},
        {"strategy": [], "early": False, "design": {"mode": "later"}},
        {"strategy": [], "early": False, "design": {"queue": "x"}},
        {"strategy": [], "early": False, "colour": "red"},
    ],
)
def test_a_tool_body_of_the_wrong_shape_is_422_naming_the_field(
    seeded: Client, body: dict[str, Any]
) -> None:
    before = draft_state()
    response = call(seeded, "put", f"{TOOL}/search", body)
    assert response.status_code == 422
    assert response.json()["error"].startswith("The request does not have the expected shape: ")
    assert draft_state() == before


def test_the_tool_schemas_follow_the_domain_fields() -> None:
    assert tuple(ExecutionIn.model_fields) == tuple(EARLY_PROFILE)
    assert tuple(DesignIn.model_fields) == DESIGN_FIELDS


# --- manifest ----------------------------------------------------------------------------------

MANIFEST = f"{MAIN}/manifest"


def test_a_manifest_is_stored_and_feeds_the_agent(seeded: Client) -> None:
    manifest = {"jobs.export": {"tool_traits": {"strategy": ["neutral"]}}}
    call(seeded, "patch", f"{CONNECTIONS}/0", {"allowed": None})  # every tool the code offers
    response = call(seeded, "put", MANIFEST, manifest)
    assert response.status_code == 200
    assert response.json() == {
        "revision": draft_state().revision,
        "agent": "main",
        "manifest": manifest,
    }
    assert AgentManifest.objects.get(agent="main").data == manifest
    tools = call(seeded, "get", CONNECTIONS).json()["connections"][0]["tools"]
    assert "export" in [t["name"] for t in tools]


def test_a_malformed_manifest_is_422_and_nothing_is_stored(seeded: Client) -> None:
    response = call(seeded, "put", MANIFEST, {"jobs.search": ["not", "an", "object"]})
    assert response.status_code == 422
    assert response.json() == {
        "error": "Manifest entry 'jobs.search' must be an object like {\"tool_traits\": {...}},"
        " not a list. Nothing was stored."
    }
    assert AgentManifest.objects.get(agent="main").data == {"jobs.search": {"tool_traits": {}}}


def test_a_manifest_with_a_nul_character_is_422(seeded: Client) -> None:
    # PostgreSQL cannot store "\u0000" in a JSON column: refused before it gets there.
    response = call(seeded, "put", MANIFEST, {"jobs.search": {"tool_traits": {"x": "a\x00b"}}})
    assert response.status_code == 422
    assert "NUL" in response.json()["error"]
    assert AgentManifest.objects.get(agent="main").data == {"jobs.search": {"tool_traits": {}}}


def test_a_manifest_over_1_mib_is_413(seeded: Client) -> None:
    big = {"jobs.search": {"tool_traits": {"x": "a" * (1024 * 1024)}}}
    response = call(seeded, "put", MANIFEST, big)
    assert response.status_code == 413
    assert response.json()["error"].startswith("The body is over the limit")
    assert AgentManifest.objects.get(agent="main").data == {"jobs.search": {"tool_traits": {}}}


def test_removing_a_manifest_and_removing_none(seeded: Client) -> None:
    response = call(seeded, "delete", MANIFEST)
    assert response.status_code == 200
    assert response.json()["removed"] == {"agent": "main"}
    assert not AgentManifest.objects.exists()
    assert call(seeded, "delete", MANIFEST).status_code == 404


# --- statuses shared by every write ------------------------------------------------------------

WRITES: list[tuple[str, str, Any]] = [
    ("post", AGENTS, {"name": "second"}),
    ("patch", MAIN, {"name": "renamed"}),
    ("delete", MAIN, None),
    ("post", CONNECTIONS, {"kind": "mcp", "server_id": "docs"}),
    ("patch", f"{CONNECTIONS}/0", {"alias": "jobs2"}),
    ("delete", f"{CONNECTIONS}/0", None),
    ("post", f"{CONNECTIONS}/0/move", {"to": 1}),
    ("put", f"{TOOL}/search", {"strategy": ["neutral"], "early": True}),
    # Not the seeded manifest: the same content again is a no-op (no revision, no audit).
    ("put", MANIFEST, {"jobs.search": {"tool_traits": {"strategy": ["neutral"]}}}),
    ("delete", MANIFEST, None),
]
WRITE_IDS = [f"{method} {url.removeprefix('/api/v1')}" for method, url, _ in WRITES]
WITH_BODY = [write for write in WRITES if write[2] is not None]
WITH_BODY_IDS = [f"{m} {u.removeprefix('/api/v1')}" for m, u, _ in WITH_BODY]
READS = [AGENTS, CONNECTIONS]


def snapshot() -> tuple[Any, ...]:
    state = draft_state()
    return state.revision, state.text, list(AgentManifest.objects.values_list("agent", "data"))


@pytest.mark.parametrize(("method", "url", "body"), WRITES, ids=WRITE_IDS)
def test_a_write_with_the_current_if_match_applies(
    seeded: Client, method: str, url: str, body: Any
) -> None:
    revision = draft_state().revision
    response = call(seeded, method, url, body, if_match=f'"{revision}"')
    assert response.status_code in (200, 201)
    assert response.json()["revision"] == draft_state().revision
    # A manifest write is a change like any other: it bumps the revision too.
    assert draft_state().revision == revision + 1


@pytest.mark.parametrize(("method", "url", "body"), WRITES, ids=WRITE_IDS)
def test_a_stale_if_match_is_409_and_changes_nothing(
    seeded: Client, method: str, url: str, body: Any
) -> None:
    before = snapshot()
    stale = before[0] - 1
    response = call(seeded, method, url, body, if_match=f'"{stale}"')
    assert response.status_code == 409
    assert response.json()["revision"] == before[0]
    assert response.json()["error"].startswith("The draft changed since you loaded it")
    assert snapshot() == before


@pytest.mark.parametrize(("method", "url", "body"), WRITES, ids=WRITE_IDS)
def test_an_if_match_that_is_no_revision_is_400(
    seeded: Client, method: str, url: str, body: Any
) -> None:
    before = snapshot()
    response = call(seeded, method, url, body, if_match="yesterday")
    assert response.status_code == 400
    assert response.json()["error"] == 'If-Match must be a quoted draft revision, like "5".'
    assert snapshot() == before


@pytest.mark.parametrize(("method", "url", "body"), WITH_BODY, ids=WITH_BODY_IDS)
def test_a_body_that_is_not_json_is_400(seeded: Client, method: str, url: str, body: Any) -> None:
    before = snapshot()
    response = call(seeded, method, url, '{"name": ')
    assert response.status_code == 400
    assert response.json()["error"].startswith("The body is not valid JSON")
    assert snapshot() == before


@pytest.mark.parametrize(("method", "url", "body"), WITH_BODY, ids=WITH_BODY_IDS)
def test_a_body_of_another_type_is_415(seeded: Client, method: str, url: str, body: Any) -> None:
    before = snapshot()
    response = call(seeded, method, url, json.dumps(body), content_type="text/plain")
    assert response.status_code == 415
    assert response.json()["error"] == "Send the body as application/json (got text/plain)."
    assert snapshot() == before


@pytest.mark.parametrize(("method", "url", "body"), WITH_BODY, ids=WITH_BODY_IDS)
def test_a_body_that_is_no_object_is_422(seeded: Client, method: str, url: str, body: Any) -> None:
    before = snapshot()
    response = call(seeded, method, url, "[]")
    assert response.status_code == 422
    assert "error" in response.json()
    assert snapshot() == before


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("get", f"{AGENTS}/ghost/connections", None),
        *[
            (method, url.replace("/main", "/ghost"), body)
            for method, url, body in WRITES
            if url.startswith(MAIN)
        ],
        *[
            (method, url.replace("/connections/0", "/connections/7"), body)
            for method, url, body in WRITES
            if "/connections/0" in url
        ],
        ("put", f"{TOOL}/nothing", {"strategy": [], "early": False}),
        ("put", f"{TOOL}/search", {"strategy": [], "early": False, "namespace": "task"}),
    ],
)
def test_an_unknown_agent_connection_or_tool_is_404(
    seeded: Client, method: str, url: str, body: Any
) -> None:
    before = snapshot()
    response = call(seeded, method, url, body)
    assert response.status_code == 404
    assert response.json()["error"]
    assert snapshot() == before


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [("get", url, None) for url in READS] + WRITES,
    ids=[f"get {u}" for u in READS] + WRITE_IDS,
)
def test_anonymous_calls_get_401_json(client: Client, method: str, url: str, body: Any) -> None:
    seed(main={"tools": [JOBS]})
    before = snapshot()
    response = call(client, method, url, body)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"].startswith("Authentication required")
    assert snapshot() == before


@pytest.fixture
def csrf_client(admin_user: User) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize(("method", "url", "body"), WRITES, ids=WRITE_IDS)
def test_a_session_write_without_the_csrf_header_is_403(
    csrf_client: Client, method: str, url: str, body: Any
) -> None:
    seed(main={"tools": [JOBS, BROWSER]})
    manifest_upload(agent="main", data={})
    before = snapshot()
    response = call(csrf_client, method, url, body)
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]
    assert snapshot() == before


def test_a_session_write_with_the_csrf_header_is_accepted(csrf_client: Client) -> None:
    csrf_client.get("/")  # the page sets the csrftoken cookie
    token = csrf_client.cookies["csrftoken"].value
    response = csrf_client.post(
        AGENTS, json.dumps({"name": "main"}), content_type=JSON, headers={"X-CSRFToken": token}
    )
    assert response.status_code == 201


# --- never a 500 --------------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 10**20),
        st.floats(allow_nan=False),
        st.text(max_size=6),
        st.sampled_from(["neutral", "exploration", "*", "mcp", "named_service", "object.get"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "kind",
                    "alias",
                    "module",
                    "server_id",
                    "allowed",
                    "namespaces",
                    "tool_traits",
                    "tool_execution",
                    "strategy",
                    "early",
                    "execution",
                    "design",
                    "timeout_s",
                    "namespace",
                    "to",
                    "name",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)


def test_random_bodies_never_make_a_write_fail_with_a_500(admin_user: User) -> None:
    client = Client()
    client.force_login(admin_user)
    writes = [
        ("post", CONNECTIONS),
        ("patch", f"{CONNECTIONS}/0"),
        ("post", f"{CONNECTIONS}/0/move"),
        ("put", f"{TOOL}/search"),
        ("put", f"{CONNECTIONS}/1/tools/open_page"),
        ("put", MANIFEST),
        ("post", AGENTS),
        ("patch", MAIN),
    ]

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(body=json_values | st.binary(min_size=1, max_size=60), write=st.sampled_from(writes))
    def check(body: Any, write: tuple[str, str]) -> None:
        draft_replace(
            data={"surfaces": {"as_consumer": {"agents": {"main": {"tools": [JOBS, BROWSER]}}}}},
            base_revision=None,
        )
        raw = body if isinstance(body, bytes) else json.dumps(body)
        response = call(client, *write, raw)
        assert response.status_code in {200, 201, 400, 404, 422}, response.content[:300]
        assert "error" in response.json() or response.status_code < 300
        # Whatever was stored, the agent still reads back.
        agent = response.json().get("agent", {}).get("name", "main") if write[1] == MAIN else "main"
        assert call(client, "get", f"{AGENTS}/{agent}/connections").status_code == 200
        assert call(client, "get", AGENTS).status_code == 200

    check()


# --- the browser and the API leave the same draft ----------------------------------------------

START = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": [JOBS, BROWSER]}}}}}
MANIFEST_DATA = {"jobs.search": {"tool_traits": {"x-team": "search"}}}


def reset() -> None:
    draft_replace(data=START, base_revision=None)
    AgentManifest.objects.all().delete()


def through_the_browser(client: Client) -> None:
    def post(url: str, **fields: Any) -> None:
        response = client.post(url, {**fields, "base_revision": draft_state().revision})
        assert response.status_code == 302, (url, response.content[:300])

    post("/policy/agents/add/", name="support")
    post(
        "/policy/agents/support/connections/new/",
        kind="mcp",
        server_id="docs",
        alias="docs",
        allowed="search\nfetch",
    )
    post(
        "/policy/agents/support/connections/new/",
        kind="python",
        module="pkg.support",
        alias="help",
        allowed="answer",
    )
    post(
        "/policy/agents/support/connections/0/tools/search/",
        strategy=["neutral"],
        early="on",
        timeout_s="20",
        mode="sync",
        retry="natural_key",
    )
    post(
        "/policy/agents/main/connections/0/tools/search/",
        strategy=["exploration"],
        trigger="tool_call_complete",
        confirm="on",
        compensation="jobs.undo",
    )
    post(
        "/policy/agents/main/connections/1/edit/",
        server_id="browser",
        alias="web",
        allowed="open_page",
    )
    post("/policy/agents/support/connections/0/move/", direction="down")
    response = client.post(
        "/policy/agents/main/manifest/",
        {"text": json.dumps(MANIFEST_DATA), "base_revision": draft_state().revision},
        follow=False,
    )
    assert response.status_code == 302
    post("/policy/agents/main/rename/", name="core")
    post("/policy/agents/support/connections/1/remove/")
    post("/policy/agents/add/", name="scratch")
    post("/policy/agents/scratch/remove/")


def through_the_api(client: Client) -> None:
    def send(method: str, url: str, body: Any = None) -> None:
        response = call(client, method, url, body, if_match=f'"{draft_state().revision}"')
        assert response.status_code in (200, 201), (url, response.content[:300])

    send("post", AGENTS, {"name": "support"})
    send(
        "post",
        f"{AGENTS}/support/connections",
        {"kind": "mcp", "alias": "docs", "server_id": "docs", "allowed": ["search", "fetch"]},
    )
    send(
        "post",
        f"{AGENTS}/support/connections",
        {"kind": "python", "alias": "help", "module": "pkg.support", "allowed": ["answer"]},
    )
    send(
        "put",
        f"{AGENTS}/support/connections/0/tools/search",
        {
            "strategy": ["neutral"],
            "early": True,
            "design": {"timeout_s": 20, "mode": "sync", "retry": "natural_key"},
        },
    )
    send(
        "put",
        f"{TOOL}/search",
        {
            "strategy": ["exploration"],
            "early": False,
            "execution": {"trigger": "tool_call_complete"},
            "design": {"confirm": True, "compensation": "jobs.undo"},
        },
    )
    send("patch", f"{CONNECTIONS}/1", {"alias": "web"})
    send("post", f"{AGENTS}/support/connections/0/move", {"to": 1})
    send("put", MANIFEST, MANIFEST_DATA)
    send("patch", MAIN, {"name": "core"})
    send("delete", f"{AGENTS}/support/connections/1")
    send("post", AGENTS, {"name": "scratch"})
    send("delete", f"{AGENTS}/scratch")


def test_the_api_and_the_browser_forms_leave_the_same_export(api: Client) -> None:
    reset()
    through_the_browser(api)
    browser_export = api.get("/api/v1/policy/export.yaml").content.decode()
    browser_manifests = list(AgentManifest.objects.values_list("agent", "data"))

    reset()
    through_the_api(api)
    api_export = api.get("/api/v1/policy/export.yaml").content.decode()

    assert api_export == browser_export
    assert list(AgentManifest.objects.values_list("agent", "data")) == browser_manifests
    # The edits really happened (not two unchanged drafts).
    agents = yaml.safe_load(api_export)["surfaces"]["as_consumer"]["agents"]
    assert list(agents) == ["core", "support"]
    assert [c["alias"] for c in agents["support"]["tools"]] == ["help"]
    assert agents["core"]["tools"][0]["tool_execution"]["search"] == {
        "confirm": True,
        "compensation": "jobs.undo",
    }
    assert browser_manifests == [("core", MANIFEST_DATA)]


# --- OpenAPI -----------------------------------------------------------------------------------


def test_the_openapi_schema_lists_the_editing_endpoints(api: Client) -> None:
    schema = api.get("/api/openapi.json").json()
    paths = schema["paths"]
    expected = {
        "/api/v1/agents": {"get", "post"},
        "/api/v1/agents/{agent}": {"patch", "delete"},
        "/api/v1/agents/{agent}/connections": {"get", "post"},
        "/api/v1/agents/{agent}/connections/{index}": {"patch", "delete"},
        "/api/v1/agents/{agent}/connections/{index}/move": {"post"},
        "/api/v1/agents/{agent}/connections/{index}/tools/{key}": {"put"},
        "/api/v1/agents/{agent}/manifest": {"put", "delete"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path
        for method in methods:
            operation = paths[path][method]
            assert operation["tags"] == ["policy editing"]
            if method != "get":
                assert "409" in operation["responses"], (path, method)
    tool_body = paths["/api/v1/agents/{agent}/connections/{index}/tools/{key}"]["put"][
        "requestBody"
    ]["content"]["application/json"]["schema"]
    assert tool_body["required"] == ["strategy", "early"]
    assert tool_body["properties"]["strategy"]["items"]["enum"] == [
        "exploration",
        "exploitation",
        "neutral",
    ]
    assert "$defs" not in json.dumps(tool_body)
