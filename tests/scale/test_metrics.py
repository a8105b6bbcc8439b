"""GET /api/v1/metrics across two workers sharing PostgreSQL: whichever worker Prometheus
reaches answers the same figures, which count what every worker ingested."""

from __future__ import annotations

import httpx

from tests.metrics.known import expected, known_events, samples
from tests.scale.conftest import Cluster


def scrape(cluster: Cluster, token: str, worker: int) -> dict[str, float]:
    response = httpx.get(
        f"{cluster.workers[worker].url}/api/v1/metrics",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    # Every figure but the bridges' report ages, which grow between two requests.
    return {k: v for k, v in samples(response.text).items() if "report_age" not in k}


def test_both_workers_answer_what_both_ingested(cluster: Cluster) -> None:
    token = cluster.manage(
        "runtime_token", "create", "scale-metrics", "--scope", "metrics:read"
    ).stdout.strip()
    before = [scrape(cluster, token, worker) for worker in (0, 1)]
    assert before[0] == before[1]
    cluster.post_events(cluster.workers[0], known_events("scale-a"))
    cluster.post_events(cluster.workers[1], known_events("scale-b"))
    after = [scrape(cluster, token, worker) for worker in (0, 1)]
    assert after[0] == after[1]
    for key, value in expected(2).items():
        assert after[0].get(key, 0) - before[0].get(key, 0) == value, key
