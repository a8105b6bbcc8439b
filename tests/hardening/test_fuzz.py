"""Arbitrary input at every door — YAML import and validate (API and CLI), manifests, the editor
forms, event ingest — is answered with a 2xx or a clear 4xx, never a 500; and whatever was
stored still shows: after each example, the pages that show that data answer 2xx.

Each example runs in a savepoint that is rolled back, so every example starts from the same
instance (the sample policy, or the empty one) and its pages show only what it stored. The number
of examples comes from the hypothesis profile (``tests/conftest.py``: 200, also on CI).
"""

from __future__ import annotations

import io
import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml
from django.contrib.auth.models import AbstractBaseUser
from django.core.handlers.wsgi import WSGIRequest
from django.db import transaction
from django.http import QueryDict
from django.test import Client
from django.utils.datastructures import MultiValueDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.vocabulary import EVENT_TYPES
from observe.models import Round
from policy import cli
from policy.models import AgentManifest
from policy.selectors import draft_state
from tests.hardening.pages import agent_pages, assert_pages_work, round_pages
from tests.markup import find_all
from tests.observe.ingest_support import EVENTS_URL, bearer, load_sample_into_draft, token

pytestmark = pytest.mark.django_db

#: The profile decides how many examples; this only relaxes what does not fit a web request.
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
YAML = "application/yaml"
FORM = "application/x-www-form-urlencoded"


def test_every_fuzz_test_runs_at_least_200_examples() -> None:
    assert settings.default.max_examples >= 200
    assert settings.default.deadline is None


@contextmanager
def rolled_back() -> Iterator[None]:
    """Whatever the example stores is undone after it (a savepoint inside the test's
    transaction), so each example starts from the same instance."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


@pytest.fixture
def tally() -> Iterator[Counter[str]]:
    """What the examples of one test came to (``-s`` prints it)."""
    outcomes: Counter[str] = Counter()
    yield outcomes
    print(f"\n{sum(outcomes.values())} examples: {dict(sorted(outcomes.items()))}")


def assert_all_examples_ran(tally: Counter[str]) -> None:
    """The profile's number of examples really ran (none was skipped or filtered away)."""
    assert sum(tally.values()) >= settings.default.max_examples


@pytest.fixture
def admin(admin_user: AbstractBaseUser) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def body_bytes(text: str) -> bytes:
    """``text`` as a client would send it: a lone surrogate as the bytes "surrogatepass" makes
    (not UTF-8 — the server must refuse or replace them, never crash)."""
    return text.encode("utf-8", "surrogatepass")


# --- strategies -------------------------------------------------------------------------------

#: Any code point, lone surrogates included (``st.text()`` leaves them out by default).
any_char = st.characters(exclude_categories=())
any_text = st.text(any_char, max_size=20)
EDGES: st.SearchStrategy[Any] = st.sampled_from(
    [
        *(10**400, -(10**400), 2**63, -(2**63) - 1, 2**53 + 1, -1, 0),
        *(1e308, -1e-308, 0.1, float("nan"), float("inf")),
        *("", " ", "\x00", "\ud800", "\udfff", "a/b", "../..", "²", "٣", "\u202e", "𝔘"),
        *("9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-11-29T18:00:00Z"),
        *(None, True, False, [], {}, [[[[[[]]]]]]),
    ]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
    | EDGES
)


def json_like(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(keys | any_text, inner, max_size=4)
        ),
        max_leaves=15,
    )


# --- (i) YAML import and validate --------------------------------------------------------------

POLICY_KEYS = [
    *("surfaces", "as_consumer", "agents", "tools", "name", "kind", "alias", "module", "ref"),
    *("allowed", "tool_traits", "tool_execution", "strategy", "execution", "namespaces", "id"),
    *("trigger", "concurrency", "result_dependency", "replay", "timeout_s", "mode", "retry"),
    *("server_id", "default_agent", "*", "python", "mcp", "named_service", "exploration"),
    *("neutral", "exploitation", "tool_call_complete", "object.search", "search_objects"),
]
policy_keys = st.sampled_from(POLICY_KEYS)
policy_values = json_like(policy_keys)
connections = st.dictionaries(
    policy_keys,
    policy_values | st.sampled_from(["python", "mcp", "named_service", "m", "x"]),
    max_size=7,
)
agent_names = st.sampled_from(["main", "helper", "a.b", "_x"]) | any_text
policies = st.builds(
    lambda agents: {"surfaces": {"as_consumer": {"agents": agents}}},
    st.dictionaries(
        agent_names,
        st.fixed_dictionaries({"tools": st.lists(connections, max_size=3)}) | policy_values,
        max_size=3,
    ),
)


def dumped(data: Any) -> str | None:
    try:
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None


yaml_texts = st.text(any_char, min_size=1, max_size=300) | st.sampled_from(
    [
        "surfaces: {as_consumer: {agents: {main: {tools: []}}}}\n",
        'surfaces: {as_consumer: {agents: {"m\\ud800": {tools: []}}}}\n',
        "a: &a [*a]\n",
        "a: !!python/object:os.system x\n",
        "surfaces: {as_consumer: {agents: {main: {tools: [{alias: x, alias: y}]}}}}\n",
        "%YAML 9.9\n---\na: 1\n",
        "\ufeffsurfaces: {}\n",
        # KDCube bundles descriptors: one bundle with a policy, none, a malformed one.
        "bundles: {items: [{id: a, config: {surfaces: {as_consumer: {agents: {m: {}}}}}}]}\n",
        "bundles: {items: [{id: a}, {id: b, props: {tools: {agents: {x: 5}}}}]}\n",
        "bundles: 7\n",
    ]
)
yaml_structures = policies.map(dumped).filter(lambda text: text is not None)


class YamlDoor:
    """One YAML text through the API (validate, then import) and the CI command; the draft's
    pages after an applied import."""

    def __init__(self, client: Client, folder: Path, tally: Counter[str]) -> None:
        self.client = client
        self.file = folder / "policy.yaml"
        self.tally = tally

    def check(self, text: str) -> None:
        raw = body_bytes(text)
        validate = self.client.post("/api/v1/policy/validate", data=raw, content_type=YAML)
        assert validate.status_code in {200, 413, 422}, validate.content[:300]
        assert "diagnostics" in validate.json()
        if validate.status_code == 422:  # a bundles descriptor without a bundle to read
            assert "policy_bundles" in validate.json()
        imported = self.client.post(
            "/api/v1/policy/import?dry_run=false", data=raw, content_type=YAML
        )
        assert imported.status_code in {200, 413, 422}, imported.content[:300]
        self.tally[f"import {imported.status_code}"] += 1
        if imported.status_code == 200:
            assert imported.json()["applied"] is True
            agents = draft_state().agents
            pages = ["/policy/", "/api/v1/agents", "/policy/export.yaml"]
            for agent in agents[:3]:
                pages += agent_pages(agent)[:4]  # the agent page, effective, catalog, playground
            assert_pages_work(self.client, pages)
        self.file.write_bytes(raw)
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(["validate", str(self.file), "--format", "json"], out, err)
        assert code in {0, 1, 2}, err.getvalue()
        assert "Traceback" not in err.getvalue()
        if code != 2:
            assert "diagnostics" in json.loads(out.getvalue())


def test_arbitrary_text_is_never_a_500_on_yaml_validate_import_or_the_cli(
    admin: Client, tally: Counter[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        door = YamlDoor(admin, Path(folder), tally)

        @FUZZ
        @given(text=yaml_texts)
        def check(text: str) -> None:
            with rolled_back():
                door.check(text)

        check()
        assert_all_examples_ran(tally)


def test_policy_like_structures_import_and_every_page_of_them_works(
    admin: Client, tally: Counter[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        door = YamlDoor(admin, Path(folder), tally)

        @FUZZ
        @given(text=yaml_structures)
        def check(text: str) -> None:
            with rolled_back():
                door.check(text)

        check()
        assert_all_examples_ran(tally)


# --- (ii) manifests ---------------------------------------------------------------------------

MANIFEST_KEYS = ["workspace_jobs.search", "tools", "strategy", "execution", "traits", "doc", "x"]
manifests = json_like(st.sampled_from(MANIFEST_KEYS)) | st.dictionaries(
    st.sampled_from(MANIFEST_KEYS) | any_text,
    st.dictionaries(st.sampled_from(["strategy", "execution", "doc"]) | any_text, scalars),
    max_size=4,
)
MAIN_PAGES = ["/policy/", "/api/v1/agents", *agent_pages("main")]


def json_body(data: Any) -> bytes:
    """JSON as a client would write it (NaN included: Python's encoder writes it)."""
    return body_bytes(json.dumps(data))


def test_arbitrary_manifests_are_stored_or_refused_and_the_agent_pages_work(
    admin: Client, tally: Counter[str]
) -> None:
    load_sample_into_draft()

    @FUZZ
    @given(manifest=manifests, through_form=st.booleans())
    def check(manifest: Any, through_form: bool) -> None:
        with rolled_back():
            if through_form:
                fields = {"page": "manifest", "text": json.dumps(manifest)}
                fields["base_revision"] = str(draft_state().revision)
                body = urlencode(fields, encoding="utf-8", errors="surrogatepass")
                response = admin.post("/policy/agents/main/manifest/", body, content_type=FORM)
                assert response.status_code in {200, 302, 400, 409, 413, 422}
            else:
                response = admin.put(
                    "/api/v1/agents/main/manifest",
                    data=json_body(manifest),
                    content_type="application/json",
                )
                assert response.status_code in {200, 400, 413, 422}, response.content[:300]
                assert response.json().get("error") or response.status_code == 200
            stored = AgentManifest.objects.filter(agent="main").exists()
            tally[f"{'form' if through_form else 'api'} {response.status_code}"] += 1
            if stored:
                assert_pages_work(admin, [*MAIN_PAGES, "/policy/agents/main/manifest/?download=1"])

    check()
    assert_all_examples_ran(tally)


# --- (iii) the editor forms -------------------------------------------------------------------


def form_fields(client: Client, url: str) -> list[str]:
    """The names of the fields the page's forms send (read from the page itself)."""
    page = client.get(url)
    assert page.status_code == 200
    controls = [
        control
        for tag in ("input", "select", "textarea", "button")
        for control in find_all(page.content.decode(), tag, name=None)
    ]
    return sorted({control.attrs["name"] for control in controls} - {"csrfmiddlewaretoken"})


field_values = (
    any_text
    | st.sampled_from(
        ["on", "", "0", "1", "-1", "1e309", "nan", "²", "exploration", "neutral", "unknown"]
    )
    | st.sampled_from(["python", "mcp", "named_service", "tool_call_complete", "sync", "async_job"])
    | st.integers().map(str)
    | st.floats().map(str)
)


@contextmanager
def form_data_as_given(fields: dict[str, Any]) -> Iterator[None]:
    """The next POSTs carry ``fields`` exactly (lone surrogates included), as if a decoder let
    them through; the HTTP path (``surrogatepass`` bytes, replaced by Django) is the other case."""
    original = WSGIRequest._load_post_and_files

    def load(request: WSGIRequest) -> None:
        data = QueryDict(mutable=True)
        for name, value in fields.items():
            data.setlist(name, value if isinstance(value, list) else [value])
        request._post = data  # type: ignore[attr-defined]
        request._files = MultiValueDict()  # type: ignore[attr-defined]

    WSGIRequest._load_post_and_files = load  # type: ignore[method-assign]
    try:
        yield
    finally:
        WSGIRequest._load_post_and_files = original  # type: ignore[method-assign]


FORMS = {
    "agent add": ("/policy/", "/policy/agents/add/"),
    "connection edit": (
        "/policy/agents/main/connections/0/edit/",
        "/policy/agents/main/connections/0/edit/",
    ),
    "connection add": (
        "/policy/agents/main/connections/new/?kind=named_service",
        "/policy/agents/main/connections/new/",
    ),
    "tool edit": (
        "/policy/agents/main/connections/0/tools/search/",
        "/policy/agents/main/connections/0/tools/search/",
    ),
}


@pytest.mark.parametrize("form", FORMS)
def test_editor_forms_with_arbitrary_values_never_500_and_the_pages_work(
    admin: Client, form: str, tally: Counter[str]
) -> None:
    load_sample_into_draft()
    page, target = FORMS[form]
    names = form_fields(admin, page)
    extra = ["kind", "ns-count", "ns-0-name", "ns-0-ops", "ns-1-name", "strategy", "name"]
    field_names = st.sampled_from(sorted({*names, *extra}))
    revision = str(draft_state().revision)

    @FUZZ
    @given(
        fields=st.dictionaries(field_names, field_values | st.lists(field_values, max_size=3)),
        keep_revision=st.booleans(),
        decoded=st.booleans(),
        htmx=st.booleans(),
    )
    def check(fields: dict[str, Any], keep_revision: bool, decoded: bool, htmx: bool) -> None:
        if form == "connection add":  # an unknown kind is a 404: mostly fuzz the kind's fields
            fields = {"kind": "named_service", **fields}
        if keep_revision:
            fields = {**fields, "base_revision": revision}
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        with rolled_back():
            if decoded:
                with form_data_as_given(fields):
                    response = admin.post(target, b"-", content_type=FORM, **headers)
            else:
                body = urlencode(fields, doseq=True, encoding="utf-8", errors="surrogatepass")
                response = admin.post(target, body, content_type=FORM, **headers)
            assert response.status_code in {200, 204, 302, 400, 404, 409, 413, 422}, (
                response.status_code
            )
            changed = draft_state().revision != int(revision)
            tally[f"{response.status_code} {'saved' if changed else 'not saved'}"] += 1
            if not changed:  # refused: the pages show what they showed before
                return
            pages = ["/policy/", "/api/v1/agents"]
            for agent in draft_state().agents[:2]:
                pages += agent_pages(agent)[:3]
            pages.append("/policy/agents/main/connections/0/edit/")
            assert_pages_work(admin, pages)

    check()
    assert_all_examples_ran(tally)


# --- (iv) event ingest ------------------------------------------------------------------------

EVENT_FIELDS = [
    *("event_id", "ts", "agent", "turn_id", "iteration", "attempt", "type", "action_index"),
    *("tool_id", "params", "extra", "max_actions", "policy_hash", "duration_ms", "status"),
    *("outcome", "action", "strategy", "code", "tool_call_id", "fingerprint", "match"),
    *("original_action_index", "limit_ms", "elapsed_ms", "async_alternative", "inferred"),
    *("multi_action_mode", "note"),
]
valid_events = st.fixed_dictionaries(
    {
        "event_id": st.uuids().map(str),
        "ts": st.sampled_from(["2026-11-29T18:00:00Z", 1795975200000, "2026-11-29T18:00:01+02:00"]),
        "agent": st.sampled_from(["main", "ghost"]),
        "turn_id": st.sampled_from(["t", "a/b", "turn 1"]),
        "iteration": st.integers(0, 3),
        "type": st.sampled_from(EVENT_TYPES),
        "action_index": st.integers(0, 3),
        "original_action_index": st.just(0),
        "max_actions": st.integers(0, 3),
        "tool_id": st.sampled_from(["workspace_jobs.search", "x.y", None]),
        "action": st.sampled_from(["call_tool", "complete", "exit"]),
        "tool_call_id": st.just("tc_1"),
        "code": st.just("multi_action_bundle_too_many_actions"),
        "status": st.sampled_from(["ok", "error"]),
        "duration_ms": st.integers(0, 10**6),
        "limit_ms": st.just(1000),
        "elapsed_ms": st.just(1001),
        "match": st.sampled_from(["slot", "fingerprint"]),
        "fingerprint": st.just("ab" * 32),
        "outcome": st.sampled_from(["ok", "retried", "failed"]),
        "strategy": st.sampled_from([["neutral"], ["exploration"], None]),
        "params": json_like(st.sampled_from(["q", "namespace"])),
    }
)
#: A valid event with a few fields replaced by anything (a surrogate, a huge int, a nest …).
near_events = st.builds(
    lambda base, noise: {**base, **noise},
    valid_events,
    st.dictionaries(
        st.sampled_from(EVENT_FIELDS) | any_text,
        EDGES | json_like(st.sampled_from(EVENT_FIELDS)),
        max_size=3,
    ),
)
batches = st.lists(
    near_events | valid_events | json_like(st.sampled_from(EVENT_FIELDS)), min_size=1, max_size=8
)
ingest_bodies = (
    batches.map(lambda events: {"events": events})
    | json_like(st.sampled_from(["events", *EVENT_FIELDS]))
    | st.fixed_dictionaries({"events": json_like(st.sampled_from(EVENT_FIELDS))})
)


def test_event_batches_are_stored_or_rejected_by_index_and_the_round_pages_work(
    admin: Client, tally: Counter[str]
) -> None:
    load_sample_into_draft()
    writer = token("events:write")

    @FUZZ
    @given(body=ingest_bodies)
    def check(body: Any) -> None:
        with rolled_back():
            response = admin.post(
                EVENTS_URL, data=json_body(body), content_type="application/json", **_auth(writer)
            )
            assert response.status_code in {200, 400, 413, 422}, response.content[:300]
            answer = response.json()
            if response.status_code != 200:
                assert set(answer) == {"error"}
                tally[f"refused {response.status_code}"] += 1
                return
            events = body["events"]
            stored = "some stored" if answer["accepted"] else "none stored"
            rejected = "some rejected by index" if answer["rejected"] else "none rejected"
            tally[f"200 {stored}, {rejected}"] += 1
            indexes = [item["index"] for item in answer["rejected"]]
            assert indexes == sorted(set(indexes))
            assert all(0 <= index < len(events) for index in indexes)
            assert answer["accepted"] + answer["duplicates"] + len(indexes) == len(events)
            pages = ["/", "/live/", "/live/history/", "/api/v1/rounds?limit=500"]
            assert_pages_work(admin, [*pages, *round_pages(Round.objects.all()[:10])])

    check()
    assert_all_examples_ran(tally)


def _auth(secret: str) -> dict[str, str]:
    return {f"HTTP_{name.upper()}": value for name, value in bearer(secret).items()}
