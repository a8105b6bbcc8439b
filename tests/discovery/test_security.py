"""Issue 34, items 1-2: what discovery may run, pass or read is decided by the operator's
settings, never by policy text an editor can write. The attack probe's payloads, against a real
allowlisted stdio MCP server (official SDK) and a real HTTP listener recording the headers that
arrive; each of these ran a command or delivered a secret before the fix."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.test import Client, override_settings

from audit.models import AuditEntry
from discovery.mcp_list import Allowlist, DiscoveryError, Limits, Target, list_tools
from policy.models import AgentManifest
from policy.services import draft_change
from tests.discovery.conftest import Listener, stdio_argv

pytestmark = pytest.mark.django_db

ARGV = stdio_argv("env")
DISCOVER = "/api/v1/agents/main/mcp/evil/discover"
SECRET = "s3cr3t-value-of-the-server"


def install(config: dict[str, Any]) -> None:
    doc = {
        "surfaces": {
            "as_consumer": {
                "mcp": {"services": {"evil": config}},
                "agents": {
                    "main": {"tools": [{"kind": "mcp", "server_id": "evil", "alias": "ev"}]}
                },
            }
        }
    }
    draft_change(edit=lambda _old: doc, base_revision=None)


def stdio(env: dict[str, str]) -> dict[str, Any]:
    return {"command": ARGV[0], "args": list(ARGV[1:]), "env": env}


def commands(*entries: Any) -> Any:
    return override_settings(TRAITDECK_MCP_STDIO_COMMANDS=json.dumps(list(entries)))


def child_env() -> set[str]:
    data = AgentManifest.objects.get(agent="main").data
    return {tool_id.removeprefix("mcp.ev.env_") for tool_id in data}


def test_the_browser_trick_runs_nothing(editor_client: Client, tmp_path: Path) -> None:
    pwned = tmp_path / "pwned.txt"
    install(
        stdio(
            {
                # The probe's payload: `import antigravity` (through a warnings filter) opens
                # a "browser", which BROWSER names as a shell command.
                "PYTHONWARNINGS": "all:0:antigravity.x:0:0",
                "BROWSER": f"/bin/sh -c 'id > {pwned}' #%s",
            }
        )
    )
    with commands(list(ARGV)):
        response = editor_client.post(DISCOVER)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert "BROWSER, PYTHONWARNINGS" in error
    assert "TRAITDECK_MCP_STDIO_COMMANDS" in error
    assert not pwned.exists()
    assert not AgentManifest.objects.exists()
    assert AuditEntry.objects.get(action="mcp.discover").after["error"] == error


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LD_PRELOAD", "/tmp/evil.so"),
        ("PYTHONPATH", "/tmp/evil"),
        ("NODE_OPTIONS", "--require /tmp/evil.js"),
    ],
)
def test_a_code_loading_variable_is_refused_by_name(
    editor_client: Client, name: str, value: str
) -> None:
    install(stdio({name: value}))
    with commands(list(ARGV)):
        response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    assert f"env sets {name}," in response.json()["error"]
    assert not AgentManifest.objects.exists()


def test_an_allowlisted_name_reaches_the_child_and_nothing_else_does(
    editor_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_KEY_OF_THE_SERVER", SECRET)  # Traitdeck's own environment
    install(stdio({"FILES_ROOT": "/srv/files"}))
    with commands({"argv": list(ARGV), "env": ["FILES_ROOT"]}):
        response = editor_client.post(DISCOVER)
    assert response.status_code == 200, response.content
    seen = child_env()
    assert "FILES_ROOT" in seen
    assert "SECRET_KEY_OF_THE_SERVER" not in seen
    # The SDK's get_default_environment() and the allowed name; Python may add LC_CTYPE.
    assert seen - {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LC_CTYPE"} == {"FILES_ROOT"}


def test_a_bare_argv_entry_allows_no_env_name(editor_client: Client) -> None:
    install(stdio({"FILES_ROOT": "/srv/files"}))
    with commands(list(ARGV)):
        response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    assert "env sets FILES_ROOT, which" in response.json()["error"]
    assert "(allowed: none)" in response.json()["error"]


def test_a_stored_secret_reference_is_checked_by_name_too(editor_client: Client) -> None:
    install(stdio({"LD_PRELOAD": "${secret:evil.so}"}))
    with commands({"argv": list(ARGV), "env": ["TOKEN"]}):
        response = editor_client.post(DISCOVER)
    assert "env sets LD_PRELOAD," in response.json()["error"]
    install(stdio({"TOKEN": "${secret:files.token}"}))
    with commands({"argv": list(ARGV), "env": ["TOKEN"]}):
        response = editor_client.post(DISCOVER)
    assert "needs a secret Traitdeck cannot read" in response.json()["error"]


def http_config(url: str, transport: str, auth: dict[str, str]) -> dict[str, Any]:
    return {"transport": transport, "url": url, "auth": auth}


LEAKS = [
    ("http", "/mcp", {"type": "bearer", "env": "SECRET_KEY"}),
    ("http", "/mcp", {"type": "header", "header": "X-Leak", "env": "TRAITDECK_KDCUBE_TOKEN"}),
    ("sse", "/sse", {"type": "api_key", "env": "DATABASE_URL"}),
]


@pytest.mark.parametrize(("transport", "path", "auth"), LEAKS)
def test_no_server_variable_goes_to_an_allowlisted_host_unless_allowed_for_its_origin(
    editor_client: Client,
    header_listener: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
    path: str,
    auth: dict[str, str],
) -> None:
    base, seen = header_listener
    monkeypatch.setenv(auth["env"], SECRET)
    install(http_config(base + path, transport, auth))
    with override_settings(TRAITDECK_MCP_HTTP_HOSTS="127.0.0.1"):
        response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    error = response.json()["error"]
    assert f"names {auth['env']!r}, which TRAITDECK_MCP_CREDENTIALS does not allow" in error
    assert SECRET not in json.dumps(seen)
    assert seen == []  # refused before connecting


def test_an_allowed_credential_is_sent_to_its_origin_only_as_listed(
    editor_client: Client,
    header_listener: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, seen = header_listener
    monkeypatch.setenv("FILES_TOKEN", SECRET)
    install(http_config(base + "/mcp", "http", {"type": "bearer", "env": "FILES_TOKEN"}))
    port = base.rsplit(":", 1)[1]
    # Listed for https only: never sent over plain http.
    https_only = json.dumps({f"https://127.0.0.1:{port}": ["FILES_TOKEN"]})
    with override_settings(
        TRAITDECK_MCP_HTTP_HOSTS="127.0.0.1", TRAITDECK_MCP_CREDENTIALS=https_only
    ):
        assert editor_client.post(DISCOVER).status_code == 422
    assert seen == []
    # Listed for another port of the same host: not this one.
    other = json.dumps({"http://127.0.0.1:1": ["FILES_TOKEN"]})
    with override_settings(TRAITDECK_MCP_HTTP_HOSTS="127.0.0.1", TRAITDECK_MCP_CREDENTIALS=other):
        assert editor_client.post(DISCOVER).status_code == 422
    assert seen == []
    listed = json.dumps({f"http://127.0.0.1:{port}": ["FILES_TOKEN"]})
    with override_settings(TRAITDECK_MCP_HTTP_HOSTS=base, TRAITDECK_MCP_CREDENTIALS=listed):
        response = editor_client.post(DISCOVER)
    assert response.status_code == 422  # the listener is no MCP server
    assert seen
    assert {h.get("authorization") for h in seen} == {f"Bearer {SECRET}"}
    assert SECRET not in json.dumps([e.after for e in AuditEntry.objects.all()])


def test_an_origin_on_the_host_list_allows_that_port_only(
    editor_client: Client, header_listener: tuple[str, list[dict[str, str]]]
) -> None:
    base, seen = header_listener
    install({"transport": "http", "url": base + "/mcp"})
    with override_settings(TRAITDECK_MCP_HTTP_HOSTS="http://127.0.0.1:1"):
        response = editor_client.post(DISCOVER)
    assert response.status_code == 422
    assert "is not on TRAITDECK_MCP_HTTP_HOSTS" in response.json()["error"]
    assert seen == []
    with override_settings(TRAITDECK_MCP_HTTP_HOSTS=base):
        editor_client.post(DISCOVER)
    assert seen  # contacted: the origin is listed


def test_check_reports_discovery_settings_it_cannot_read() -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    bad = {
        "TRAITDECK_MCP_STDIO_COMMANDS": '[{"argv": ["x"], "env": "PATH"}]',
        "TRAITDECK_MCP_CREDENTIALS": '{"127.0.0.1:80": ["X"]}',
        "TRAITDECK_MCP_HTTP_HOSTS": "ftp://host",
    }
    with override_settings(**bad), pytest.raises(SystemCheckError) as raised:
        call_command("check")
    for name in bad:
        assert f"{name} cannot be read" in str(raised.value)


# --- a credential goes to the target's own origin only (issue 34, item 2) ---------------------
# Two real listeners on 127.0.0.1 (two ports: two origins of one allowlisted host), each
# recording the headers that reach it. The target is ``a``; ``b`` must never see the token.


def _bearer_run(
    client: Client, target: str, transport: str, hosts: str, credentials: dict[str, list[str]]
) -> Any:
    install(http_config(target, transport, {"type": "bearer", "env": "FILES_TOKEN"}))
    with override_settings(
        TRAITDECK_MCP_HTTP_HOSTS=hosts, TRAITDECK_MCP_CREDENTIALS=json.dumps(credentials)
    ):
        return client.post(DISCOVER)


@pytest.mark.parametrize("status", [302, 307, 308])
@pytest.mark.parametrize("b_may_have_it", [False, True], ids=["b-not-listed", "b-listed-too"])
def test_a_credential_never_follows_a_redirect_to_another_origin(
    editor_client: Client,
    listener: Callable[..., Listener],
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    b_may_have_it: bool,
) -> None:
    """Even when b's host is allowlisted (a bare host: any port) and b's origin may receive the
    same variable: during a run, the token goes to the target's own origin and nowhere else."""
    monkeypatch.setenv("FILES_TOKEN", SECRET)
    b = listener()
    a = listener(redirect=f"{b.url}/mcp", status=status)
    credentials = {a.url: ["FILES_TOKEN"], **({b.url: ["FILES_TOKEN"]} if b_may_have_it else {})}
    response = _bearer_run(editor_client, f"{a.url}/mcp", "http", "127.0.0.1", credentials)
    assert response.status_code == 422
    error = response.json()["error"]
    assert f"redirecting to {b.url}/mcp" in error
    assert "another origin" in error
    assert [h.get("authorization") for h in a.seen] == [f"Bearer {SECRET}"]
    assert b.seen == []  # nothing at all reached the other origin
    assert SECRET not in json.dumps([e.after for e in AuditEntry.objects.all()])


@pytest.mark.parametrize(
    "where",
    ["{b}/messages/?session_id=1", "//127.0.0.1:{b_port}/messages/?session_id=1"],
    ids=["absolute", "scheme-relative"],
)
@pytest.mark.parametrize("b_may_have_it", [False, True], ids=["b-not-listed", "b-listed-too"])
def test_a_credential_never_follows_an_sse_endpoint_that_points_elsewhere(
    editor_client: Client,
    listener: Callable[..., Listener],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    b_may_have_it: bool,
) -> None:
    """An SSE server names where the client POSTs (its ``endpoint`` event): naming another
    origin must not draw the token (nor anything else) there."""
    monkeypatch.setenv("FILES_TOKEN", SECRET)
    b = listener()
    a = listener(endpoint=where.format(b=b.url, b_port=b.url.rsplit(":", 1)[1]))
    credentials = {a.url: ["FILES_TOKEN"], **({b.url: ["FILES_TOKEN"]} if b_may_have_it else {})}
    hosts = f"{a.url},{b.url}"  # both origins allowlisted
    started = time.perf_counter()
    response = _bearer_run(editor_client, f"{a.url}/sse", "sse", hosts, credentials)
    assert response.status_code == 422
    assert time.perf_counter() - started < 10  # refused at once: it sat at the 20 s limit
    error = response.json()["error"]
    assert f"The SSE server named {b.url}/messages/ for the client's messages" in error
    assert "session_id" not in error
    assert [h.get("authorization") for h in a.seen] == [f"Bearer {SECRET}"]
    assert b.seen == []


@pytest.mark.parametrize(
    "listed",
    [
        "https://127.0.0.1:{port}",  # the https origin: never over plain http
        "http://localhost:{port}",  # another host name for the same socket is another origin
        "http://127.0.0.1",  # port 80
        "http://127.0.0.1:1",  # another port
    ],
)
def test_a_credential_goes_over_plain_http_only_to_an_origin_listed_with_http(
    editor_client: Client,
    listener: Callable[..., Listener],
    monkeypatch: pytest.MonkeyPatch,
    listed: str,
) -> None:
    monkeypatch.setenv("FILES_TOKEN", SECRET)
    a = listener()
    origin = listed.format(port=a.url.rsplit(":", 1)[1])
    response = _bearer_run(editor_client, f"{a.url}/mcp", "http", a.url, {origin: ["FILES_TOKEN"]})
    assert response.status_code == 422
    assert "TRAITDECK_MCP_CREDENTIALS does not allow" in response.json()["error"]
    assert a.seen == []  # refused before connecting: nothing was sent at all
    # Listed with http:// exactly: sent, and only there.
    _bearer_run(editor_client, f"{a.url}/mcp", "http", a.url, {a.url: ["FILES_TOKEN"]})
    assert {h.get("authorization") for h in a.seen} == {f"Bearer {SECRET}"}


def test_a_credential_origin_without_a_scheme_is_refused_and_nothing_is_sent(
    editor_client: Client, listener: Callable[..., Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FILES_TOKEN", SECRET)
    a = listener()
    bare = a.url.removeprefix("http://")
    response = _bearer_run(editor_client, f"{a.url}/mcp", "http", a.url, {bare: ["FILES_TOKEN"]})
    assert response.status_code == 422
    assert "A discovery setting cannot be read" in response.json()["error"]
    assert a.seen == []


def test_during_a_run_only_the_targets_own_origin_is_added_to_the_host_list(
    listener: Callable[..., Listener],
) -> None:
    """An origin entry allows that port only, also for the requests a server draws the client
    to: an SSE endpoint on another port of the same host is refused (no credential at all)."""
    b = listener()
    a = listener(endpoint=f"{b.url}/messages/?session_id=1")
    allowlist = Allowlist(hosts=frozenset({f"{a.url}"}))  # a's origin: http://127.0.0.1:<a>
    with pytest.raises(DiscoveryError, match="another origin than http://127.0.0.1"):
        anyio.run(list_tools, Target("sse", url=f"{a.url}/sse"), Limits(timeout_s=10), allowlist)
    assert len(a.seen) == 1
    assert b.seen == []
