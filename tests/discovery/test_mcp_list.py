"""Listing real MCP servers written with the official SDK, over stdio and streamable HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

from discovery.mcp_list import (
    Allowlist,
    DiscoveryError,
    Limits,
    StdioCommand,
    Target,
    _CountedText,
    list_tools,
    manifest_entries,
    parse_commands,
    parse_credentials,
    parse_hosts,
    refusal,
)
from engine.tools.manifest import parse_manifest
from tests.discovery.conftest import stdio_argv

#: The time limit of a listing expected to succeed: a ceiling, not a wait (a listing returns when
#: done). Each listing starts a Python process that imports the MCP SDK, which on a machine whose
#: cores are busy takes several seconds.
TIME_LIMIT_S = 60
ENOUGH = Limits(timeout_s=TIME_LIMIT_S)


def _list(target: Target, limits: Limits = ENOUGH):  # type: ignore[no-untyped-def]
    return anyio.run(list_tools, target, limits)


def test_it_keeps_annotations_exactly_as_the_server_sent_them_over_stdio() -> None:
    listing = _list(Target("stdio", argv=stdio_argv("mixed")))
    sent = {tool.name: tool.annotations for tool in listing.tools}
    assert sent == {
        "read_file": {"readOnlyHint": True},
        "list_dir": {"readOnlyHint": True, "openWorldHint": False},
        "write_file": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
        "delete_file": {"destructiveHint": True},
        "stat": None,  # no annotations: absent, not filled with defaults
    }
    assert listing.tools[0].input_schema["required"] == ["path"]


def test_it_reads_every_page_and_records_the_page_of_each_tool() -> None:
    listing = _list(Target("stdio", argv=stdio_argv("paged")))
    assert listing.pages == 3
    assert [(t.name, t.page) for t in listing.tools] == [
        ("tool_0", 1), ("tool_1", 1), ("tool_2", 1),
        ("tool_3", 2), ("tool_4", 2), ("tool_5", 2),
        ("tool_6", 3),
    ]  # fmt: skip


def test_it_lists_over_streamable_http(http_server: Callable[[str], str]) -> None:
    url = http_server("paged")
    listing = _list(Target("http", url=url))
    assert listing.pages == 3
    assert len(listing.tools) == 7


def test_it_lists_over_sse(sse_server: Callable[[str], str]) -> None:
    url = sse_server("paged")
    listing = _list(Target("sse", url=url))
    assert listing.pages == 3
    assert len(listing.tools) == 7


def test_it_gives_up_on_a_server_that_never_answers_at_the_time_limit() -> None:
    started = time.perf_counter()
    with pytest.raises(DiscoveryError, match=r"did not answer within 1 s"):
        _list(Target("stdio", argv=stdio_argv("silent")), Limits(timeout_s=1))
    # Far from "never" (the server never answers); the slack is stopping a process that may still
    # be importing the SDK on a busy machine.
    assert time.perf_counter() - started < 30


def test_it_stops_at_garbage_before_the_time_limit() -> None:
    started = time.perf_counter()
    with pytest.raises(DiscoveryError, match="not MCP"):
        _list(Target("stdio", argv=stdio_argv("garbage")), Limits(timeout_s=120))
    # Neither the time limit nor the server's exit (it sleeps 60 s after the garbage) ended it.
    assert time.perf_counter() - started < 60


def test_it_refuses_more_tools_than_the_cap_and_returns_nothing() -> None:
    with pytest.raises(DiscoveryError, match=r"more than 50 tools"):
        _list(
            Target("stdio", argv=stdio_argv("many:100")),
            Limits(timeout_s=TIME_LIMIT_S, max_tools=50),
        )


def test_it_refuses_a_listing_over_the_byte_cap() -> None:
    with pytest.raises(DiscoveryError, match="more than 5000 bytes"):
        _list(
            Target("stdio", argv=stdio_argv("many:100")),
            Limits(timeout_s=TIME_LIMIT_S, max_bytes=5000),
        )


def test_it_stops_reading_stdio_as_soon_as_the_bytes_pass_the_cap() -> None:
    # Issue 34, item 7: the SDK reads a whole line (one page) before anything is parsed; the
    # bytes are counted as they arrive, so a page far over the cap is not read to its end.
    from mcp.client import stdio

    assert stdio.TextReceiveStream is _CountedText  # the SDK still reads through this name
    started = time.perf_counter()
    with pytest.raises(DiscoveryError, match="sent more than 20000 bytes.*stopped reading"):
        _list(
            Target("stdio", argv=stdio_argv("many")),
            Limits(timeout_s=TIME_LIMIT_S, max_bytes=20_000),
        )
    assert time.perf_counter() - started < TIME_LIMIT_S


def test_it_stops_reading_over_http_as_soon_as_the_bytes_pass_the_cap(
    http_server: Callable[[str], str],
) -> None:
    # Issue 34, item 7: the cap was checked after a whole page was read and parsed (a 40 MB page
    # took 17 s and kept 161 MiB); now the HTTP client counts the bytes as they arrive.
    url = http_server("many")
    with pytest.raises(DiscoveryError, match="sent more than 20000 bytes.*stopped reading"):
        anyio.run(
            list_tools,
            Target("http", url=url),
            Limits(timeout_s=TIME_LIMIT_S, max_bytes=20_000),
            LOOPBACK,
        )


def test_it_lists_5000_tools_under_the_default_caps() -> None:
    listing = _list(Target("stdio", argv=stdio_argv("many")), Limits(timeout_s=TIME_LIMIT_S))
    assert len(listing.tools) == 5000


def test_it_says_why_a_server_is_not_contacted() -> None:
    argv = stdio_argv("mixed")
    nothing = Allowlist()
    assert "TRAITDECK_MCP_STDIO_COMMANDS" in (refusal(Target("stdio", argv=argv), nothing) or "")
    # Exact argv match: the interpreter alone, or other arguments, are not enough.
    only_python = Allowlist(commands=(StdioCommand((argv[0],)),))
    assert refusal(Target("stdio", argv=argv), only_python) is not None
    exact = Allowlist(commands=(StdioCommand(argv),))
    assert refusal(Target("stdio", argv=argv), exact) is None
    # The policy's env may set only the names the operator's entry lists.
    with_env = Target("stdio", argv=argv, env={"LD_PRELOAD": "/tmp/x.so"})
    assert "env sets LD_PRELOAD" in (refusal(with_env, exact) or "")
    allowing = Allowlist(commands=(StdioCommand(argv, frozenset({"LD_PRELOAD"})),))
    assert refusal(with_env, allowing) is None
    loopback = Target("http", url="http://127.0.0.1:9/mcp")
    assert "TRAITDECK_MCP_HTTP_HOSTS" in (refusal(loopback, Allowlist(hosts=frozenset())) or "")
    assert refusal(loopback, Allowlist(hosts=frozenset({"127.0.0.1"}))) is None
    assert refusal(loopback, Allowlist(hosts=parse_hosts("http://127.0.0.1:9"))) is None
    assert refusal(loopback, Allowlist(hosts=parse_hosts("https://127.0.0.1:9"))) is not None
    assert refusal(loopback, Allowlist(hosts=parse_hosts("http://127.0.0.1"))) is not None
    assert refusal(Target("http", url="file:///etc/passwd"), Allowlist()) is not None


def test_it_reads_the_command_allowlist_as_argv_arrays() -> None:
    assert parse_commands('[["/usr/bin/python3", "/srv/mcp/files.py"]]') == (
        StdioCommand(("/usr/bin/python3", "/srv/mcp/files.py")),
    )
    assert parse_commands('[{"argv": ["/usr/bin/node", "s.js"], "env": ["ROOT"]}]') == (
        StdioCommand(("/usr/bin/node", "s.js"), frozenset({"ROOT"})),
    )
    for bad in (
        '["/usr/bin/python3 /srv/mcp/files.py"]',
        '[{"argv": ["x"], "env": "ROOT"}]',
        '[{"argv": [], "env": []}]',
        '[{"argv": ["x"], "shell": true}]',
    ):
        with pytest.raises(ValueError, match="argv arrays"):
            parse_commands(bad)


def test_it_reads_origins_and_credentials() -> None:
    assert parse_hosts("Example.org, https://API.example.org, http://127.0.0.1:8000/") == {
        "example.org",
        "https://api.example.org:443",
        "http://127.0.0.1:8000",
    }
    assert parse_credentials('{"https://api.example.org": ["A"], "http://h:81": ["B"]}') == {
        ("https", "api.example.org", 443): frozenset({"A"}),
        ("http", "h", 81): frozenset({"B"}),
    }
    for bad in ('{"api.example.org": ["A"]}', '{"https://h/path": ["A"]}', '["A"]'):
        with pytest.raises(ValueError, match="TRAITDECK_MCP_CREDENTIALS"):
            parse_credentials(bad)


def test_its_entries_are_a_valid_manifest_with_provenance_and_no_traits() -> None:
    listing = _list(Target("stdio", argv=stdio_argv("mixed")))
    entries = manifest_entries(
        listing,
        alias="fs",
        server_id="files",
        by="ana",
        at="2026-12-02T09:00:00",
        transport="stdio",
    )
    manifest = parse_manifest(entries)
    assert "mcp.fs.read_file" in manifest
    entry = entries["mcp.fs.write_file"]
    assert "tool_traits" not in entry  # the runtime reads no traits from a server
    assert entry["params"] == [{"name": "path", "type": "string", "required": True}]
    assert entry["source"]["page"] == 1
    assert entry["source"]["by"] == "ana"
    assert entry["source"]["sdk"].startswith("mcp 2.")
    assert "annotations" not in entries["mcp.fs.stat"]


LOOPBACK = Allowlist(hosts=frozenset({"127.0.0.1"}))


@pytest.mark.parametrize("status", [307, 308, 302])
@pytest.mark.parametrize(
    ("transport", "path", "moved"),
    [("http", "/mcp", "/mcp"), ("sse", "/sse", "/sse"), ("sse", "/messages/", "/messages/")],
    ids=["http-post", "sse-get", "sse-post"],
)
def test_it_refuses_a_redirect_to_a_host_off_the_allowlist_and_sends_nothing_there(
    request: pytest.FixtureRequest,
    bystander: Callable[[str], tuple[int, Callable[[], bool]]],
    transport: str,
    path: str,
    moved: str,
    status: int,
) -> None:
    port, reached = bystander("127.0.0.2")
    elsewhere = f"http://127.0.0.2:{port}{moved}"
    start = request.getfixturevalue(f"{transport}_server")
    url = start("paged", "--redirect", path, str(status), elsewhere)
    started = time.perf_counter()
    with pytest.raises(DiscoveryError) as refused:
        anyio.run(list_tools, Target(transport, url=url), ENOUGH, LOOPBACK)
    assert f"redirecting to {elsewhere}" in str(refused.value)
    assert "'127.0.0.2' is not on TRAITDECK_MCP_HTTP_HOSTS" in str(refused.value)
    assert not reached()
    assert time.perf_counter() - started < TIME_LIMIT_S / 2  # refused, not at the time limit


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_it_refuses_a_redirect_to_another_origin_even_on_an_allowlisted_host(
    request: pytest.FixtureRequest,
    bystander: Callable[[str], tuple[int, Callable[[], bool]]],
    transport: str,
) -> None:
    port, reached = bystander("127.0.0.1")  # the listed host, another port: another origin
    path = "/mcp" if transport == "http" else "/sse"
    url = request.getfixturevalue(f"{transport}_server")(
        "paged", "--redirect", path, "307", f"http://127.0.0.1:{port}{path}"
    )
    with pytest.raises(DiscoveryError, match="only within the endpoint's origin"):
        anyio.run(list_tools, Target(transport, url=url), ENOUGH, LOOPBACK)
    assert not reached()


def test_it_follows_a_redirect_within_the_endpoints_origin(
    http_server: Callable[..., str],
) -> None:
    url = http_server("paged", "--redirect", "/moved", "307", "/mcp")
    moved = url.replace("/mcp", "/moved")
    listing = anyio.run(list_tools, Target("http", url=moved), ENOUGH, LOOPBACK)
    assert len(listing.tools) == 7
