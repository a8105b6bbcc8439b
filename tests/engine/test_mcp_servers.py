"""Where the runtime finds an MCP server's config (base_workflow's order, every shape)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.tools.mcp_servers import HTTP, SSE, STDIO, auth_headers, server_config

CFG = {"command": "/usr/bin/python3", "args": ["/srv/files.py"]}
SURFACE = "surfaces.as_consumer.mcp"


def consumer(mcp: dict[str, Any]) -> dict[str, Any]:
    return {"surfaces": {"as_consumer": {"mcp": mcp}}}


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (consumer({"services": {"files": CFG}}), f"{SURFACE}.services"),
        (consumer({"services": json.dumps({"mcpServers": {"files": CFG}})}), f"{SURFACE}.services"),
        (consumer({"mcpServers": {"files": CFG}}), f"{SURFACE}.mcpServers"),
        (consumer({"servers": {"files": CFG}}), f"{SURFACE}.servers"),
        ({"mcp": {"services": {"servers": {"files": CFG}}}}, "mcp.services"),
        ({"mcp": {"mcpServers": {"files": CFG}}}, "mcp.mcpServers"),
        ({"mcp_services": {"files": CFG}}, "mcp_services"),
    ],
)  # fmt: skip
def test_it_finds_a_config_in_every_place_and_shape_the_runtime_reads(
    data: dict[str, Any], where: str
) -> None:
    found = server_config(data, "files")
    assert found is not None
    assert found.where == f"{where}.files"
    assert found.argv == ("/usr/bin/python3", "/srv/files.py")


def test_it_takes_the_first_non_empty_place_like_the_runtime() -> None:
    data = {
        "surfaces": {"as_consumer": {"mcp": {"services": {}}}},  # KDCube's workspace example
        "mcp": {"services": {"files": {"transport": "http", "url": "http://a/mcp"}}},
        "mcp_services": {"files": CFG},
    }
    found = server_config(data, "files")
    assert found is not None
    assert found.transport == HTTP
    assert found.url == "http://a/mcp"


def test_it_stops_at_the_first_place_even_without_the_server() -> None:
    data = {"mcp": {"services": {"other": CFG}}, "mcp_services": {"files": CFG}}
    assert server_config(data, "files") is None


def test_it_reads_the_environment_last() -> None:
    env = json.dumps({"files": {"transport": "sse", "endpoint": "http://b/sse"}})
    found = server_config({"surfaces": {"as_consumer": {"mcp": {"services": {}}}}}, "files", env)
    assert found is not None
    assert (found.transport, found.where) == (SSE, "MCP_SERVICES.files")


def test_it_reports_secrets_it_cannot_read_without_guessing() -> None:
    cfg = {
        "transport": "streamable-http",
        "url": "http://a/mcp",
        "env": {"TOKEN": "${secret:files.token}", "MODE": "ro"},
        "auth": {"type": "bearer", "secret": "files.api_key"},
    }
    found = server_config({"mcp_services": {"files": cfg}}, "files")
    assert found is not None
    assert found.needs_secret
    assert found.secrets == ("env TOKEN (${secret:files.token})", "auth.secret files.api_key")
    assert found.env == {"MODE": "ro"}


def test_it_builds_the_header_the_runtime_sends() -> None:
    def cfg(auth: dict[str, str]) -> Any:
        return server_config(
            {"mcp_services": {"s": {"url": "u", "transport": "http", "auth": auth}}}, "s"
        )

    assert auth_headers(cfg({"type": "bearer", "env": "T"}), "tok") == {
        "Authorization": "Bearer tok"
    }
    assert auth_headers(cfg({"type": "api_key", "env": "T"}), "tok") == {"X-API-Key": "tok"}
    assert auth_headers(cfg({"type": "header", "header": "X-K", "env": "T"}), "tok") == {
        "X-K": "tok"
    }
    assert auth_headers(cfg({"type": "bearer", "env": "T"}), None) == {}


def test_it_says_why_a_config_cannot_be_listed() -> None:
    interactive = {"transport": "http", "url": "u", "auth": {"type": "oauth_gui"}}
    found = server_config({"mcp_services": {"s": interactive}}, "s")
    assert found is not None
    assert "interactive" in found.problems[0]
    found = server_config({"mcp_services": {"s": {"transport": "local"}}}, "s")
    assert found is not None
    assert found.transport == STDIO
    assert "no command" in found.problems[0]
