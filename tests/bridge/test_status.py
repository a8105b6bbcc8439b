"""The bridge's heartbeat: ``POST /api/v1/bridge/status`` and the overview line it feeds."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from accounts.tokens import runtime_token_create

pytestmark = pytest.mark.django_db


def post(client: Client, secret: str, body: Any) -> Any:
    return client.post(
        "/api/v1/bridge/status",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


def test_a_report_is_stored_and_the_overview_says_how_long_ago_the_last_envelope_came(
    viewer_client: Client,
) -> None:
    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    now_ms = int(time.time() * 1000)
    counts = {
        "envelopes": 42,
        "mapped": 30,
        "inferred": 70,
        "skipped": 12,
        "reasons": {"decision delta of a round already started": 12},
    }
    answer = post(
        Client(), secret, {"name": "kdcube", "last_envelope_ms": now_ms - 3000, "counts": counts}
    )
    assert answer.status_code == 200
    assert isinstance(answer.json()["agents"], list)
    page = viewer_client.get("/").content.decode()
    assert "bridge kdcube" in page
    assert "last envelope 3 s ago" in page or "last envelope 4 s ago" in page
    assert "42 envelopes, 30 mapped, 70 inferred events, 12 skipped" in page


def test_a_bad_report_is_refused_with_a_reason_and_a_token_is_needed() -> None:
    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    reader = runtime_token_create(name="reader", scopes=["events:read"]).secret
    bad = post(Client(), secret, {"name": "", "counts": {}})
    assert bad.status_code == 422
    assert "name" in bad.json()["error"]
    assert post(Client(), secret, {"name": "k", "counts": {"mapped": -1}}).status_code == 422
    assert post(Client(), reader, {"name": "k"}).status_code == 403
    assert post(Client(), "nope", {"name": "k"}).status_code == 401
