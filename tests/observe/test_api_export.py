"""``GET /api/v1/rounds/export.jsonl``: recorded rounds as ``traitdeck replay`` reads them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from engine.catalog.multi_action import ModeSources, multi_action_mode
from engine.replay.draft_impact import outcomes, parse_recorded_round
from engine.round.dryrun import dry_run
from engine.tools.resolution import resolve_consumer
from observe.domain.rounds import assembly_actions
from observe.models import Round
from tests.observe.live_support import HandRound, ingest, ingest_simulated, sample_policy

pytestmark = pytest.mark.django_db


def export(client: Client, query: str = "") -> list[dict[str, Any]]:
    response = client.get(f"/api/v1/rounds/export.jsonl{query}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/x-ndjson")
    body = b"".join(response).decode()
    return [json.loads(line) for line in body.splitlines()]


def test_every_simulated_round_replays_to_the_verdicts_it_recorded(viewer_client: Client) -> None:
    """The simulator runs the engine: replaying what it recorded under the same policy must give
    back, per action, every recorded rejection (and its rule), early start and dedup — the export
    loses nothing the engine needs."""
    # 10 s apart, starting 40 minutes ago: every event lies in the past.
    ingest_simulated(200, start=timezone.now() - timedelta(minutes=40))
    lines = export(viewer_client)
    assert len(lines) == Round.objects.count() == 200
    resolution = resolve_consumer(sample_policy(), "main")
    kinds = {"rejected": 0, "early": 0, "dedup": 0}
    for line in lines:
        spec = parse_recorded_round(line).spec
        assert "multi_action_mode" in line
        mode = multi_action_mode(spec.multi_action_mode, ModeSources())
        predicted = outcomes(dry_run(spec, resolution, multi_action_mode=mode))
        row = Round.objects.get(agent="main", turn_id=spec.turn_id, iteration=spec.iteration)
        recorded = assembly_actions(row.assembly)
        for (attempt, index), action in recorded.items():
            _, outcome = predicted[(attempt + 1, index)]
            where = f"{spec.turn_id}/{spec.iteration} attempt {attempt + 1} #{index}"
            assert outcome.rejected == (action.verdict == "rejected"), where
            assert outcome.code == action.code or not outcome.rejected, where
            assert outcome.early == (action.early and action.ledger != "dedup"), where
            assert outcome.dedup == (action.ledger == "dedup"), where
            kinds["rejected"] += outcome.rejected
            kinds["early"] += outcome.early
            kinds["dedup"] += outcome.dedup
    assert min(kinds.values()) > 0, kinds


def test_filters_and_limit_select_the_newest_matching_rounds(viewer_client: Client) -> None:
    ingest_simulated(30)
    newest = export(viewer_client, "?limit=5")
    assert len(newest) == 5
    expected = list(
        Round.objects.order_by("-started_at", "-pk").values_list("turn_id", flat=True)[:5]
    )
    assert [line["turn_id"] for line in newest] == expected
    rejected = export(viewer_client, "?has=rejection")
    assert len(rejected) == Round.objects.filter(rejections__gt=0).count() > 0


def test_a_round_with_nothing_observed_is_left_out(viewer_client: Client) -> None:
    ingest(HandRound(turn_id="t-empty").started().events)
    assert export(viewer_client) == []


def test_bad_filters_are_422_with_a_reason(viewer_client: Client) -> None:
    response = viewer_client.get("/api/v1/rounds/export.jsonl?limit=0")
    assert response.status_code == 422
    assert "limit must be between 1" in response.json()["error"]
    response = viewer_client.get("/api/v1/rounds/export.jsonl?has=nope")
    assert response.status_code == 422


def test_anonymous_is_401() -> None:
    assert Client().get("/api/v1/rounds/export.jsonl").status_code == 401
