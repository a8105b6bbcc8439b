"""``manage.py simulate``: exit codes, and rounds that the real ingest accepts.

A run against a real daphne server is the browser test's job (tests/e2e/test_live.py). Here the
command's HTTP client gets an ``httpx.MockTransport`` that hands each request to Django's test
client, so the events go through the real ``POST /api/v1/events`` (token auth, validation,
storage) in-process, and the clock is fake so a run takes no real time.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from accounts.tokens import runtime_token_create
from observe.management.commands import simulate
from observe.models import Round
from policy.domain.yaml_io import agent_export_text, split_header
from policy.selectors import draft_state
from policy.services import draft_change
from policy.versions import policy_publish
from simulator import posting

ROOT = Path(__file__).resolve().parents[2]
URL = "http://traitdeck.test"

pytestmark = pytest.mark.django_db


class FakeClock:
    """``time`` for the command: sleeping only moves the clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        self.slept += max(0.0, seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(simulate, "time", fake)
    return fake


@pytest.fixture
def sample_policy() -> None:
    call_command("load_sample_policy", stdout=StringIO())


@pytest.fixture
def token() -> str:
    return runtime_token_create(name="simulator", scopes=["events:write", "config:read"]).secret


Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], list[Any]]:
    """Install a handler for the command's requests; returns the list of posted batches."""

    def install(handler: Handler) -> list[Any]:
        posted: list[Any] = []

        def record(request: httpx.Request) -> httpx.Response:
            if request.method == "POST":
                posted.append(httpx.Response(200, content=request.content).json()["events"])
            return handler(request)

        monkeypatch.setattr(simulate.Command, "transport", httpx.MockTransport(record))
        return posted

    return install


def django_handler(request: httpx.Request) -> httpx.Response:
    """Serve the request with Django's test client: the real API, no server process."""
    client = Client()
    headers = {"Authorization": request.headers["Authorization"]}
    path = request.url.raw_path.decode()
    if request.method == "POST":
        response = client.post(
            path,
            data=request.content,
            content_type=request.headers["Content-Type"],
            headers=headers,
        )
    else:
        response = client.get(path, headers=headers)
    return httpx.Response(
        response.status_code, content=response.content, headers=dict(response.headers.items())
    )


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("simulate", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- exit codes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "3", "--forever", "--url", URL, "--token", "t"], "not allowed with"),
        (["--rounds", "0", "--url", URL, "--token", "t"], "not at least 1"),
        (["--rounds", "many", "--url", URL, "--token", "t"], "not a whole number"),
        (["--rate", "0", "--url", URL, "--token", "t"], "not a positive number"),
        (["--rate", "fast", "--url", URL, "--token", "t"], "not a number"),
        (["--token", "t"], "--url"),
        (["--url", "ftp://example.org", "--token", "t"], "http:// or https://"),
        (["--url", "http://", "--token", "t"], "with a host"),
        (["--url", "http://x:99999", "--token", "t"], "invalid port"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message) as caught:
        run(*args)
    assert caught.value.returncode == 2


def test_both_rounds_and_forever_as_options_exit_2() -> None:
    with pytest.raises(CommandError, match="either --rounds or --forever") as caught:
        call_command("simulate", rounds=3, forever=True, url=URL, token="t")
    assert caught.value.returncode == 2


def test_no_token_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(simulate.TOKEN_ENV, raising=False)
    with pytest.raises(CommandError, match="--token") as caught:
        run("--url", URL)
    assert caught.value.returncode == 2


def test_an_unreachable_server_exits_2(sample_policy: None) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(CommandError, match=f"cannot reach the server at {url}") as caught:
        run("--url", url, "--token", "t", "--rounds", "1")
    assert caught.value.returncode == 2


def test_a_url_that_is_not_traitdeck_exits_2(sample_policy: None, transport: Any) -> None:
    transport(lambda request: httpx.Response(404, text="<h1>Not Found</h1>"))
    with pytest.raises(CommandError, match="does not look like a Traitdeck server") as caught:
        run("--url", URL, "--token", "t", "--rounds", "1")
    assert caught.value.returncode == 2


def test_no_agents_in_the_policy_exits_1() -> None:
    with pytest.raises(CommandError, match="^no agents in the policy$") as caught:
        run("--url", URL, "--token", "t")
    assert caught.value.returncode == 1


def test_an_agent_not_in_the_policy_exits_1(sample_policy: None) -> None:
    with pytest.raises(CommandError, match="agent 'ghost' is not in the policy") as caught:
        run("--url", URL, "--token", "t", "--agent", "ghost")
    assert caught.value.returncode == 1


def test_a_refused_token_exits_1(sample_policy: None, transport: Any, clock: FakeClock) -> None:
    transport(django_handler)
    with pytest.raises(CommandError, match=r"refused the token \(401\)") as caught:
        run("--url", URL, "--token", "tdk_not-a-real-token", "--rounds", "1")
    assert caught.value.returncode == 1


def test_a_token_without_events_write_exits_1(
    sample_policy: None, transport: Any, clock: FakeClock
) -> None:
    reader = runtime_token_create(name="reader", scopes=["events:read"]).secret
    transport(django_handler)
    with pytest.raises(CommandError, match="lacks the events:write scope") as caught:
        run("--url", URL, "--token", reader, "--rounds", "1")
    assert caught.value.returncode == 1


def test_a_token_revoked_mid_run_exits_1_after_the_summary(
    sample_policy: None, transport: Any, clock: FakeClock, token: str
) -> None:
    calls = Counter[str]()

    def handler(request: httpx.Request) -> httpx.Response:
        calls[request.method] += 1
        if request.method == "POST" and calls["POST"] > 3:
            return httpx.Response(401, json={"error": "Authentication required."})
        return django_handler(request)

    transport(handler)
    out = StringIO()
    with pytest.raises(CommandError, match="refused the token") as caught:
        call_command("simulate", "--url", URL, "--token", token, "--rounds", "5", stdout=out)
    assert caught.value.returncode == 1
    assert "posted " in out.getvalue()


def test_a_shell_gets_exit_2_and_one_line_without_traceback(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    command = [sys.executable, "manage.py", "simulate", "--url", URL, "--token", "t"]
    for extra in (["--rounds", "2", "--forever"], ["--rate", "-1"]):
        done = subprocess.run(
            [*command, *extra], cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


# --- what it posts ------------------------------------------------------------------------------


def test_rounds_go_through_the_real_ingest_with_every_kind(
    sample_policy: None, transport: Any, clock: FakeClock, token: str
) -> None:
    version = policy_publish(actor="cli", message="sample", confirm_warnings=True)
    posted = transport(django_handler)
    out, err = run("--url", URL, "--token", token, "--rounds", "12", "--rate", "4", "--seed", "3")

    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("simulating main -> http://traitdeck.test/api/v1/events: 12 rounds")
    assert "seed 3" in lines[0]
    assert len(lines) == 1 + 12 + 1  # header, one line per round, summary
    events = [event for batch in posted for event in batch]
    assert lines[-1].startswith("posted 12 rounds")
    assert f"events accepted {len(events)}, duplicates 0, rejected 0" in lines[-1]

    rounds = Round.objects.all()
    assert rounds.count() == 12
    assert all(r.finished_at is not None and r.outcome for r in rounds)
    for column in ("rejections", "early_starts", "dedups", "timeouts"):
        assert rounds.filter(**{f"{column}__gt": 0}).exists(), column
    # round.started carries the hash of the config.yaml it fetched (DESIGN §6), as a runtime
    # reports it: the published version's per-agent hash.
    assert {r.policy_hash for r in rounds} == {version.agent_hashes["main"]}
    # Paced in real time: 12 rounds started at 4 per second, each delivered over 1-3 s.
    assert 2.75 + 1.0 <= clock.slept <= 2.75 + 3.0 + 0.5


def test_it_simulates_the_draft_and_says_so_when_nothing_is_published(
    sample_policy: None, transport: Any, clock: FakeClock, token: str
) -> None:
    transport(django_handler)
    _, err = run("--url", URL, "--token", token, "--rounds", "2", "--seed", "3", "--quiet")
    assert err.strip() == "agent main: simulating the draft (nothing published for it yet)"
    expected, _ = split_header(agent_export_text(draft_state().data, "main"))
    assert {r.policy_hash for r in Round.objects.all()} == {expected}


def test_a_round_is_posted_in_time_order_in_a_few_batches(
    sample_policy: None, transport: Any, clock: FakeClock
) -> None:
    posted = transport(lambda request: _accept_all(request))
    run("--url", URL, "--token", "t", "--rounds", "6", "--rate", "0.5", "--seed", "7", "--quiet")

    by_round: dict[tuple[str, int], list[list[dict[str, Any]]]] = {}
    for batch in posted:
        keys = {(e["turn_id"], e["iteration"]) for e in batch}
        assert len(keys) == 1  # a batch never mixes rounds
        by_round.setdefault(keys.pop(), []).append(batch)
    assert len(by_round) == 6
    for batches in by_round.values():
        assert len(batches) >= 3  # streaming, after generation, the end
        events = [event for batch in batches for event in batch]
        assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
        assert events[0]["type"] == "round.started"
        assert batches[-1] == [events[-1]]
        assert events[-1]["type"] == "round.finished"
        gen = [b for b in batches if b[0]["type"] == "generation.finished"]
        assert len(gen) == 1


def test_the_same_seed_posts_the_same_events(
    sample_policy: None, transport: Any, clock: FakeClock
) -> None:
    def events(seed: str) -> list[tuple[Any, ...]]:
        posted = transport(_accept_all)
        run("--url", URL, "--token", "t", "--rounds", "8", "--seed", seed, "--quiet")
        return [
            tuple(sorted((k, repr(v)) for k, v in event.items() if k != "ts"))
            for batch in posted
            for event in batch
        ]

    first = events("11")
    assert first == events("11")
    assert first != events("12")


def test_a_transient_failure_is_posted_again(
    sample_policy: None, transport: Any, clock: FakeClock
) -> None:
    calls = Counter[str]()

    def flaky(request: httpx.Request) -> httpx.Response:
        calls[request.method] += 1
        if request.method == "POST" and calls["POST"] == 2:
            return httpx.Response(503, json={"error": "busy"})
        return _accept_all(request)

    posted = transport(flaky)
    out, _ = run("--url", URL, "--token", "t", "--rounds", "2", "--quiet")
    assert posted[1] == posted[2]  # the same batch, same event ids: ingest counts no double
    assert out.startswith("posted 2 rounds")


def test_a_busy_server_is_waited_on_as_long_as_its_retry_after_says(
    sample_policy: None, transport: Any, clock: FakeClock
) -> None:
    calls = Counter[str]()
    waits: list[float] = []
    sleep = clock.sleep

    def record(seconds: float) -> None:
        waits.append(seconds)
        sleep(seconds)

    clock.sleep = record  # type: ignore[method-assign]

    def busy(request: httpx.Request) -> httpx.Response:
        calls[request.method] += 1
        if request.method == "POST" and calls["POST"] == 1:
            return httpx.Response(503, json={"error": "busy"}, headers={"Retry-After": "7"})
        return _accept_all(request)

    posted = transport(busy)
    out, _ = run("--url", URL, "--token", "t", "--rounds", "1", "--quiet")
    assert posted[0] == posted[1]
    assert 7.0 in waits
    assert out.startswith("posted 1 round")


def test_events_the_server_rejects_make_exit_1(
    sample_policy: None, transport: Any, clock: FakeClock
) -> None:
    def reject_first(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return _accept_all(request)
        count = len(httpx.Response(200, content=request.content).json()["events"])
        rejected = [{"index": 0, "error": "event_id reused with different content"}]
        return httpx.Response(
            200, json={"accepted": count - 1, "duplicates": 0, "rejected": rejected}
        )

    transport(reject_first)
    err = StringIO()
    with pytest.raises(CommandError, match="the server rejected") as caught:
        call_command(
            "simulate", "--url", URL, "--token", "t", "--rounds", "2", stdout=StringIO(), stderr=err
        )
    assert caught.value.returncode == 1
    assert err.getvalue().count("reused") == 1  # each reason once
    assert "use another --seed" in err.getvalue()


def _accept_all(request: httpx.Request) -> httpx.Response:
    if request.method == "GET":
        return httpx.Response(200, json={"kind": "token", "name": "t", "scopes": ["events:write"]})
    count = len(httpx.Response(200, content=request.content).json()["events"])
    return httpx.Response(200, json={"accepted": count, "duplicates": 0, "rejected": []})


def test_plan_batches_spread_a_round_over_one_to_three_seconds() -> None:
    def event(ms: int, kind: str, attempt: int = 0) -> dict[str, Any]:
        return {
            "event_id": f"00000000-0000-4000-8000-{ms:012d}",
            "ts": ms,
            "agent": "main",
            "turn_id": "t",
            "iteration": 0,
            "type": kind,
            "attempt": attempt,
        }

    long_round = [
        event(0, "round.started"),
        event(500, "action.observed"),
        event(2000, "action.observed", attempt=1),
        event(3000, "generation.finished", attempt=1),
        event(25000, "tool.timeout", attempt=1),
        event(25100, "round.finished"),
    ]
    batches = posting.plan_batches(long_round)
    assert [len(chunk) for _, chunk in batches] == [2, 1, 2, 1]
    assert batches[0][0] == 0.0
    assert batches[-1][0] == pytest.approx(posting.MAX_ROUND_S)
    short = posting.plan_batches([event(0, "round.started"), event(100, "round.finished")])
    assert short[-1][0] == pytest.approx(posting.MIN_ROUND_S)


def test_forever_follows_a_newly_published_policy_like_a_runtime_polling_its_config(
    sample_policy: None, transport: Any, clock: FakeClock, token: str
) -> None:
    """The simulator polls config.yaml every 10 s: rounds after a publish carry the new
    version's hash, and the runtime doing what that version says shows no drift."""
    first = policy_publish(actor="cli", message="sample", confirm_warnings=True)
    posts: list[int] = []
    second: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        response = django_handler(request)
        if request.method == "POST":
            posts.append(1)
            if len(posts) == 10:

                def edit(doc: dict[str, Any]) -> dict[str, Any]:
                    tools = doc["surfaces"]["as_consumer"]["agents"]["main"]["tools"]
                    tools[0]["tool_traits"]["launch_background_job"]["strategy"] = ["exploration"]
                    return doc

                draft_change(edit=edit, base_revision=None)
                second.append(policy_publish(actor="cli", message="explore", confirm_warnings=True))
            if len(posts) == 250:
                raise KeyboardInterrupt
        return response

    transport(handler)
    out, _ = run("--url", URL, "--token", token, "--forever", "--rate", "2", "--seed", "5")
    new_hash = second[0].agent_hashes["main"]
    assert f"agent main: the policy in force changed, now {new_hash}" in out
    hashes = set(Round.objects.values_list("policy_hash", flat=True))
    assert hashes == {first.agent_hashes["main"], new_hash}
    finished = Round.objects.filter(outcome__isnull=False)
    assert set(finished.values_list("drift", flat=True)) == {False}
