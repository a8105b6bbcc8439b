"""Writes of every kind, interleaved: after each step a 5xx stored nothing, and the pages work.

A hypothesis rule-based state machine drives one superuser session through the editor API
(agents, connections, traits), the editor forms, manifests, imports, and event ingest with
arbitrary text in every string field and arbitrary-size numbers. After each step:

- an answer of 500 or more left the audit log and every stored table exactly as they were (every
  write validates before it commits, in one transaction);
- every page and read route that shows stored data answers 2xx (``tests/hardening/pages.py``).

Bounded so ``make test`` stays short: ``MACHINES`` runs of at most ``STEPS`` steps each (each
step then GETs every page of the policy and of each stored round); the teardown of each run
crawls every page and same-site link once. Each run starts from the sample policy and rolls
back to it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from audit.models import AuditEntry
from core.vocabulary import EVENT_TYPES
from observe.models import Event, Round
from policy.models import AgentManifest, PolicyDraft, PolicyVersion
from tests.hardening.pages import (
    FIXED_API,
    FIXED_PAGES,
    assert_every_page_works,
    assert_pages_work,
    event_pages,
    policy_pages,
)
from tests.hardening.test_fuzz import EDGES, any_text, field_values, json_like, policy_keys
from tests.observe.ingest_support import EVENTS_URL, bearer, load_sample_into_draft, token

pytestmark = pytest.mark.django_db

#: Runs of the machine (hypothesis examples) and the most steps each takes.
MACHINES = 8
STEPS = 6
JSON = "application/json"

#: Any size of number, and text of any code point (lone surrogates included).
numbers = (
    st.sampled_from([10**400, -(10**400), 2**63, 2**64, 10**18, 1e308])
    | st.integers()
    | st.floats()
)
texts = any_text | EDGES
anything = json_like(policy_keys)
#: Numbers no float holds and no 64-bit column stores.
HUGE = st.sampled_from([10**400, -(10**400), 2**64])


def snapshot() -> tuple[Any, ...]:
    """Everything a write may store: the audit log and each table behind the pages."""
    draft = PolicyDraft.objects.values_list("revision", "body").first()
    return (
        list(AuditEntry.objects.order_by("pk").values_list("pk", "action")),
        draft,
        sorted(AgentManifest.objects.values_list("agent", "data")),
        PolicyVersion.objects.count(),
        Round.objects.count(),
        Event.objects.count(),
    )


class Writes(RuleBasedStateMachine):
    """One editor at work, with input nobody vetted."""

    def __init__(self) -> None:
        super().__init__()
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        load_sample_into_draft()
        user = get_user_model().objects.create_superuser(
            f"stateful-{uuid.uuid4().hex[:8]}", password="x"
        )
        self.client = Client(raise_request_exception=False)
        self.client.force_login(user)
        self.writer = token("events:write")
        self.steps: list[str] = []

    def teardown(self) -> None:
        try:
            assert_every_page_works(self.client, crawl_limit=150)
        finally:
            transaction.set_rollback(True)
            self._atomic.__exit__(None, None, None)

    def send(self, label: str, call: Any) -> None:
        before = snapshot()
        response = call()
        self.steps.append(f"{label} → {response.status_code}")
        if response.status_code >= 500:
            assert snapshot() == before, f"{label} answered {response.status_code} but stored"
            pytest.fail(f"{label} answered {response.status_code}: {response.content[:300]!r}")

    def api(self, method: str, url: str, body: Any) -> Any:
        try:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        except ValueError:  # NaN and the like: sent as Python writes them
            data = repr(body).encode("utf-8", "surrogatepass")
        return getattr(self.client, method)(url, data=data, content_type=JSON)

    @rule(body=anything, agent=st.sampled_from(["main", "helper"]) | texts)
    def add_agent(self, body: Any, agent: Any) -> None:
        payload = {"name": agent, **(body if isinstance(body, dict) else {})}
        self.send("POST agents", lambda: self.api("post", "/api/v1/agents", payload))

    @rule(body=anything)
    def add_connection(self, body: Any) -> None:
        payload = {"kind": "mcp", "server_id": "s", **(body if isinstance(body, dict) else {})}
        url = "/api/v1/agents/main/connections"
        self.send("POST connections", lambda: self.api("post", url, payload))

    @rule(timeout=HUGE | numbers)
    def add_timed_connection(self, timeout: Any) -> None:
        """A well-formed connection whose only oddity is its timeout, so the number reaches the
        validator instead of an earlier refusal."""
        payload = {"kind": "mcp", "server_id": "s", "alias": "s2", "allowed": ["t"]}
        payload["tool_execution"] = {"t": {"timeout_s": timeout}}
        url = "/api/v1/agents/main/connections"
        self.send("POST connections", lambda: self.api("post", url, payload))

    @rule(body=anything, index=st.integers(-1, 3))
    def patch_connection(self, body: Any, index: int) -> None:
        url = f"/api/v1/agents/main/connections/{index}"
        self.send("PATCH connection", lambda: self.api("patch", url, body))

    @rule(body=anything)
    def put_traits(self, body: Any) -> None:
        url = "/api/v1/agents/main/connections/0/tools/search"
        self.send("PUT traits", lambda: self.api("put", url, body))

    @rule(body=anything | st.just({"jobs.search": {"tool_traits": {"strategy": ["neutral"]}}}))
    def put_manifest(self, body: Any) -> None:
        url = "/api/v1/agents/main/manifest"
        self.send("PUT manifest", lambda: self.api("put", url, body))

    @rule(body=anything, number=numbers)
    def import_policy(self, body: Any, number: Any) -> None:
        text = "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools:\n"
        text += f"        - {{kind: mcp, server_id: s, x: {number!r}}}\n"
        if isinstance(body, dict) and body:
            text = json.dumps({"surfaces": {"as_consumer": {"agents": body}}}, default=str)
        url = "/api/v1/policy/import?dry_run=false"
        self.send(
            "POST import",
            lambda: self.client.post(
                url, data=text.encode("utf-8", "surrogatepass"), content_type="application/yaml"
            ),
        )

    @rule(
        fields=st.dictionaries(
            st.sampled_from(["alias", "server_id", "strategy", "ns-count", "timeout_s", "name"]),
            field_values,
            max_size=5,
        )
    )
    def form_connection(self, fields: dict[str, Any]) -> None:
        body = urlencode(
            {"kind": "mcp", **fields}, doseq=True, encoding="utf-8", errors="surrogatepass"
        )
        url = "/policy/agents/main/connections/new/"
        self.send(
            "form connection",
            lambda: self.client.post(url, body, content_type="application/x-www-form-urlencoded"),
        )

    @rule(
        agent=st.sampled_from(["main", "helper"]) | texts,
        turn=st.sampled_from(["t-1", "t/2"]) | texts,
        kind=st.sampled_from(sorted(EVENT_TYPES)),
        extra=st.dictionaries(
            st.sampled_from(["tool_id", "action", "max_actions", "action_index", "params"])
            | any_text,
            texts | numbers | anything,
            max_size=4,
        ),
        iteration=st.integers(0, 3) | numbers,
    )
    def ingest(
        self, agent: Any, turn: Any, kind: str, extra: dict[str, Any], iteration: Any
    ) -> None:
        event = {
            "event_id": str(uuid.uuid4()),
            "ts": "2026-11-29T18:00:00Z",
            "agent": agent,
            "turn_id": turn,
            "iteration": iteration,
            "type": kind,
            "max_actions": 2,
            **extra,
        }
        try:
            body = json.dumps({"events": [event]}).encode("utf-8", "surrogatepass")
        except ValueError:
            return  # NaN in JSON is the fuzz suite's case; here every event is valid JSON
        self.send(
            "POST events",
            lambda: self.client.post(
                EVENTS_URL, data=body, content_type=JSON, headers=bearer(self.writer)
            ),
        )

    @invariant()
    def pages_work(self) -> None:
        assert_pages_work(self.client, [*FIXED_PAGES, *FIXED_API, *policy_pages(), *event_pages()])


def test_interleaved_writes_store_nothing_on_a_5xx_and_every_page_keeps_working() -> None:
    run_state_machine_as_test(
        Writes,
        settings=settings(
            max_examples=MACHINES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
