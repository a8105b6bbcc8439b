"""Shared by the observe API and service tests: tokens, posting events, realistic rounds."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from django.test import Client

from accounts.tokens import runtime_token_create
from policy.domain.yaml_io import load_policy
from policy.services import draft_replace
from simulator.runtime import Simulator

EVENTS_URL = "/api/v1/events"
ROUNDS_URL = "/api/v1/rounds"
SAMPLE = Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
NOW = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def token(*scopes: str, name: str | None = None) -> str:
    """A real runtime token's secret."""
    return runtime_token_create(name=name or f"t-{uuid.uuid4().hex[:8]}", scopes=scopes).secret


def post_events(client: Client, events: Any, secret: str, **extra: Any) -> Any:
    body = events if isinstance(events, str | bytes) else json.dumps({"events": events})
    return client.post(
        EVENTS_URL, data=body, content_type="application/json", headers=bearer(secret), **extra
    )


@cache
def _sample_text() -> bytes:
    return SAMPLE.read_bytes()


def sample_policy() -> dict[str, Any]:
    loaded = load_policy(_sample_text())
    assert isinstance(loaded.data, dict)
    return loaded.data


def load_sample_into_draft() -> None:
    draft_replace(data=sample_policy(), base_revision=None)


def simulated_rounds(
    count: int, *, seed: int = 7, agents: list[str] | None = None, gap_s: int = 10
) -> list[list[dict[str, Any]]]:
    """``count`` realistic rounds of the sample policy, one list of JSON events per round."""
    simulator = Simulator(sample_policy(), seed=seed, agents=agents)
    return [simulator.next_round(NOW + timedelta(seconds=gap_s * i))[1] for i in range(count)]


def event(
    type_: str,
    *,
    agent: str = "main",
    turn_id: str = "turn-1",
    iteration: int = 0,
    ts: str = "2026-11-29T18:00:00.000Z",
    **fields: Any,
) -> dict[str, Any]:
    """A hand-made event; the fields each type requires come from ``fields``."""
    return {
        "event_id": str(uuid.uuid4()),
        "ts": ts,
        "agent": agent,
        "turn_id": turn_id,
        "iteration": iteration,
        "type": type_,
        **fields,
    }


def started(**kwargs: Any) -> dict[str, Any]:
    return event("round.started", max_actions=2, **kwargs)
