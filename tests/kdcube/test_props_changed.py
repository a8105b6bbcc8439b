"""``POST /api/v1/kdcube/props-changed`` (issue 34 item 8): the writer's name is a report relayed
by the bridge, never a verified user, capped in length and characters; calls are coalesced into
at most one KDCube read per bundle per few seconds."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from accounts.tokens import runtime_token_create
from audit.models import AuditEntry
from kdcube import services as kdcube
from kdcube.models import KDCubeRead
from tests.kdcube.kdcube_replay import ReplayServer

pytestmark = pytest.mark.django_db
URL = "/api/v1/kdcube/props-changed"


@pytest.fixture
def server(server: ReplayServer) -> ReplayServer:
    server.expect_always("drift-read")
    return server


@pytest.fixture
def bearer() -> str:
    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    return f"Bearer {secret}"


def changed(bearer: str, updated_by: str = "") -> Any:
    return Client().post(
        URL,
        {"source": "listener", "updated_by": updated_by},
        content_type="application/json",
        HTTP_AUTHORIZATION=bearer,
    )


def test_the_reported_writer_is_capped_and_never_a_verified_actor(
    server: ReplayServer, bearer: str
) -> None:
    from policy.services import draft_replace
    from policy.versions import policy_publish
    from tests.kdcube.test_push import VERSION

    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v", confirm_warnings=True)
    name = "kdcube:admin<script>alert(1)</script> " + "x" * 900
    answer = changed(bearer, name)
    assert answer.status_code == 200
    assert answer.json()["outside_change"] is True
    read = KDCubeRead.objects.get()
    assert read.updated_by == ("kdcubeadminscriptalert1scriptx" + "x" * 64)[:64]
    assert len(read.updated_by) == 64
    entry = AuditEntry.objects.get(action="kdcube.outside-change")
    assert entry.actor_name == "kdcube"  # never the caller's name
    assert entry.after["reported_by"] == read.updated_by
    assert "<script>" not in entry.message
    assert "(reported by KDCube as `kdcubeadminscript" in entry.message


def test_a_name_past_the_bound_is_refused_clearly(server: ReplayServer, bearer: str) -> None:
    answer = changed(bearer, "x" * 1001)
    assert answer.status_code == 422
    assert not KDCubeRead.objects.exists()
    assert server.served == []


def test_calls_in_a_row_read_kdcube_once_per_window(
    server: ReplayServer, bearer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kdcube, "READ_EVERY_S", 1.0)
    started = time.monotonic()
    first = changed(bearer).json()
    assert first["coalesced"] is False
    # Within the window: this call waits for its end and reads once more (a change written
    # meanwhile is not missed).
    second = changed(bearer).json()
    assert second["coalesced"] is False
    assert time.monotonic() - started >= 1.0
    assert server.served == ["drift-read", "drift-read"]


# A burst of concurrent calls: tests/kdcube/bridge/test_kdcube_guard.py (a real daphne on a SQLite
# file).
