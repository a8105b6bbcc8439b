"""A real Prometheus (Debian's ``prometheus``) scrapes a real Traitdeck worker: after known events
are ingested, PromQL over the scraped series gives the counts and rates those events imply, and
the alert rules load and evaluate against them."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.metrics.known import SEARCH, SEARCH_DURATIONS, SEARCH_TIMEOUTS, known_events
from tests.metrics.tools import need
from tests.servers import ROOT, daphne_command, server_env, start_server, stop

RULES = ROOT / "deploy" / "prometheus" / "traitdeck-rules.yml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Stack:
    def __init__(self, worker: str, prometheus: str, writer: str) -> None:
        self.worker, self.prometheus, self.writer = worker, prometheus, writer

    def post(self, events: list[dict[str, Any]]) -> None:
        response = httpx.post(
            f"{self.worker}/api/v1/events",
            content=json.dumps({"events": events}),
            headers={"Authorization": f"Bearer {self.writer}", "Content-Type": "application/json"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        assert response.json()["rejected"] == [], response.text

    def query(self, promql: str) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.prometheus}/api/v1/query", params={"query": promql})
        body = response.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, promql: str, expected: float, *, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while (found := self.value(promql)) != expected:
            assert time.monotonic() < deadline, f"{promql} = {found}, not {expected}"
            time.sleep(0.25)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = need("prometheus")
    work = tmp_path_factory.mktemp("prometheus")
    env = server_env(work / "db.sqlite3", "prometheus", TRAITDECK_SERVE_STATIC="1")
    _manage(env, "migrate", "--no-input", "-v0")
    writer = _manage(env, "runtime_token", "create", "runtime", "--scope", "events:write")
    scraper = _manage(env, "runtime_token", "create", "prometheus", "--scope", "metrics:read")
    port, prom_port = _free_port(), _free_port()
    worker = start_server(
        daphne_command(port), env=env, url=f"http://127.0.0.1:{port}", log=work / "worker.log"
    )
    (work / "token").write_text(scraper)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "traitdeck",
                "metrics_path": "/api/v1/metrics",
                "authorization": {"type": "Bearer", "credentials_file": str(work / "token")},
                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
            }
        ],
    }
    (work / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    log = (work / "prometheus.log").open("wb")
    server = subprocess.Popen(  # noqa: S603
        [
            prometheus,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{prom_port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/-/ready", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, (work / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "prometheus did not get ready in 60 s"
            time.sleep(0.2)
        yield Stack(f"http://127.0.0.1:{port}", url, writer)
    finally:
        stop(server, grace_s=10)
        log.close()
        stop(worker)


def test_promql_counts_and_rates_are_what_the_events_imply(stack: Stack) -> None:
    stack.wait_for('up{job="traitdeck"}', 1)
    first = known_events("first")
    stack.post(first)
    stack.wait_for('traitdeck_ingest_events_total{result="accepted"}', len(first))
    # A second scrape of the first batch, then the second batch: the rates over both are the
    # second batch's own.
    time.sleep(2.5)
    second = known_events("second")
    stack.post(second)
    stack.wait_for('traitdeck_ingest_events_total{result="accepted"}', 2 * len(first))
    time.sleep(2.5)  # at least one more scrape of the same values

    calls = sum(count for _, count in SEARCH_DURATIONS)
    search = f'agent="main",tool="{SEARCH}"'
    assert stack.value('sum(traitdeck_rounds_total{outcome="ok"})') == 6
    assert stack.value('sum(traitdeck_rounds_total{outcome="failed"})') == 2
    assert stack.value(f"traitdeck_tool_timeouts_total{{{search}}}") == 2 * SEARCH_TIMEOUTS
    accepted = f'traitdeck_actions_total{{{search},disposition="accepted"}}'
    assert stack.value(accepted) == 2 * (calls + SEARCH_TIMEOUTS)
    # What the second batch added, read from the series over the last minute.
    window = "[1m]"
    added = f"max_over_time({accepted}{window}) - min_over_time({accepted}{window})"
    assert stack.value(added) == calls + SEARCH_TIMEOUTS
    # The alert's ratio: both rates are taken over the same scrapes, so extrapolation cancels
    # and the ratio is exactly the batch's timeouts over its calls.
    ratio = stack.value(f"traitdeck:tool_timeout_ratio:rate5m{{{search}}}")
    assert ratio == pytest.approx(SEARCH_TIMEOUTS / (calls + SEARCH_TIMEOUTS))
    # rate() over the whole minute: the batch spread over the window's seconds.
    per_second = stack.value(f"sum(rate(traitdeck_tool_timeouts_total{window}))")
    assert per_second is not None
    assert per_second > 0
    # The median duration (rank 5 of 10: 4 calls under 5 ms, 3 more under 50 ms): Prometheus
    # interpolates within the bucket (0.025, 0.05].
    median = stack.value(
        f"histogram_quantile(0.5, traitdeck_tool_call_duration_seconds_bucket{{{search}}})"
    )
    assert median == pytest.approx(0.025 + 0.025 * (5 - 4) / 3)
    # The rules loaded and evaluate; a tool timing out in 1 of 6 calls is over 5 %, pending
    # until it has lasted 15 minutes.
    rules = httpx.get(f"{stack.prometheus}/api/v1/rules").json()["data"]["groups"]
    assert {rule["name"] for group in rules for rule in group["rules"]} >= {
        "TraitdeckToolTimeoutRateHigh",
        "TraitdeckBridgeDroppingRounds",
    }
    alerts = httpx.get(f"{stack.prometheus}/api/v1/alerts").json()["data"]["alerts"]
    assert [(a["labels"]["alertname"], a["labels"]["tool"], a["state"]) for a in alerts] == [
        ("TraitdeckToolTimeoutRateHigh", SEARCH, "pending")
    ]
