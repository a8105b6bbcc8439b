"""Where the runtime finds an MCP server's config, and what Traitdeck can do with it (DESIGN §7).

The runtime (``chatbot/base_workflow.py::_resolve_mcp_services_config``) takes the first
non-empty of ``surfaces.as_consumer.mcp.services``, ``surfaces.as_consumer.mcp.{mcpServers|
servers}``, ``mcp.services``, ``mcp.{mcpServers|servers}``, ``mcp_services``, then the
``MCP_SERVICES`` environment variable; a services value is a mapping or a JSON string, either
``{servers|mcpServers: {id: cfg}}`` or a flat ``{id: cfg}``
(``mcp/mcp_tools_subsystem.py::_parse_mcp_services_config``). A server config names its
transport (default stdio; ``local`` is stdio), ``command``/``args``/``env`` or ``endpoint``/
``url``, and ``auth``/``credentials``; interactive auth makes the runtime skip the server.

This module reads those shapes; it never resolves a secret and never reads the environment
itself (the caller passes ``MCP_SERVICES`` when it has one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

STDIO: Final = "stdio"
HTTP: Final = "http"
SSE: Final = "sse"

_STDIO_NAMES: Final = frozenset({"stdio", "local"})
_HTTP_NAMES: Final = frozenset({"http", "streamable-http", "streamable_http"})
_INTERACTIVE: Final = frozenset({"oauth_gui", "oauth-gui", "interactive", "browser", "device_code"})
_SECRET_PREFIX: Final = "${secret:"

#: The places the runtime looks, in its order (the environment variable comes last).
LOOKUP_ORDER: Final = (
    "surfaces.as_consumer.mcp.services",
    "surfaces.as_consumer.mcp",
    "mcp.services",
    "mcp",
    "mcp_services",
    "MCP_SERVICES",
)


@dataclass(frozen=True)
class ServerConfig:
    """One server's config as Traitdeck reads it. ``where`` names the place it was found;
    ``problems`` says why Traitdeck cannot list it (empty: it can, subject to the allowlists)."""

    server_id: str
    where: str
    transport: str
    url: str = ""
    argv: tuple[str, ...] = ()
    #: Literal environment values the config names (``${secret:…}`` ones are left out).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Every name the config's ``env`` sets, ``${secret:…}`` ones included.
    env_names: tuple[str, ...] = ()
    auth_type: str = ""
    #: The environment variable holding the token (its name only; never the value).
    auth_env: str = ""
    auth_header: str = ""
    #: What needs KDCube's secret store (``auth.secret``, ``${secret:…}`` env values).
    secrets: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def needs_secret(self) -> bool:
        return bool(self.secrets)


def services_config(data: Any, env_json: str = "") -> tuple[str, Mapping[str, Any]] | None:
    """The services mapping the runtime would use and where it was found, or ``None``."""
    for where, raw in _candidates(data, env_json):
        parsed = _parse_services(raw)
        if parsed is not None:
            return where, parsed
    return None


def _candidates(data: Any, env_json: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for base in (("surfaces", "as_consumer", "mcp"), ("mcp",)):
        block = _path(data, base)
        label = ".".join(base)
        services = block.get("services") if isinstance(block, Mapping) else None
        if (isinstance(services, Mapping) and services) or (
            isinstance(services, str) and services.strip()
        ):
            out.append((f"{label}.services", services))
        if isinstance(block, Mapping):
            for key in ("mcpServers", "servers"):
                value = block.get(key)
                if isinstance(value, Mapping) and value:
                    out.append((f"{label}.{key}", {key: value}))
                    break
    flat = data.get("mcp_services") if isinstance(data, Mapping) else None
    if (isinstance(flat, Mapping) and flat) or (isinstance(flat, str) and flat.strip()):
        out.append(("mcp_services", flat))
    if env_json:
        out.append(("MCP_SERVICES", env_json))
    # The runtime stops at the first candidate, even one it then fails to parse.
    return out[:1]


def _path(data: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _parse_services(raw: Any) -> Mapping[str, Any] | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, Mapping):
        return {}
    for key in ("servers", "mcpServers"):
        if isinstance(raw.get(key), Mapping):
            return raw[key]  # type: ignore[no-any-return]
    return raw


def server_config(data: Any, server_id: str, env_json: str = "") -> ServerConfig | None:
    """The config of ``server_id`` where the runtime would find it, or ``None`` (no config
    anywhere Traitdeck can read: ``mcp-server-unconfigured``)."""
    found = services_config(data, env_json)
    if found is None:
        return None
    where, services = found
    cfg = services.get(server_id)
    if not isinstance(cfg, Mapping) or not cfg:
        return None
    return read_config(server_id, cfg, where=f"{where}.{server_id}")


def read_config(server_id: str, cfg: Mapping[str, Any], *, where: str) -> ServerConfig:
    """Read one server config; ``problems`` lists what stops Traitdeck from listing it."""
    problems: list[str] = []
    secrets: list[str] = []
    name = str(cfg.get("transport") or STDIO).strip().lower()
    transport = STDIO if name in _STDIO_NAMES else HTTP if name in _HTTP_NAMES else name
    if transport not in (STDIO, HTTP, SSE):
        problems.append(f"its transport {name!r} is not stdio, streamable HTTP or SSE")
    url = str(cfg.get("endpoint") or cfg.get("url") or "")
    command = cfg.get("command")
    args = cfg.get("args") or []
    argv: tuple[str, ...] = ()
    if transport == STDIO:
        if not command:
            problems.append("it has no command (the runtime skips it)")
        else:
            argv = (str(command), *(str(a) for a in (args if isinstance(args, list) else [])))
    elif transport in (HTTP, SSE) and not url:
        problems.append("it has no url or endpoint (the runtime skips it)")
    env: dict[str, str] = {}
    raw_env = cfg.get("env")
    if isinstance(raw_env, Mapping):
        for key, value in raw_env.items():
            if isinstance(value, str) and value.startswith(_SECRET_PREFIX):
                secrets.append(f"env {key} ({value})")
            else:
                env[str(key)] = str(value)
    auth = cfg.get("auth") or cfg.get("credentials")
    auth_type = auth_env = auth_header = ""
    if isinstance(auth, Mapping):
        auth_type = str(auth.get("type") or "").strip().lower()
        auth_env = str(auth.get("env") or "")
        auth_header = str(auth.get("header") or "")
        if auth_type in _INTERACTIVE:
            problems.append(f"its auth is interactive ({auth_type}): the runtime skips it")
        if auth.get("secret"):
            secrets.append(f"auth.secret {auth.get('secret')}")
    return ServerConfig(
        server_id=server_id,
        where=where,
        transport=transport,
        url=url,
        argv=argv,
        env=env,
        env_names=tuple(str(key) for key in raw_env) if isinstance(raw_env, Mapping) else (),
        auth_type=auth_type,
        auth_env=auth_env,
        auth_header=auth_header,
        secrets=tuple(secrets),
        problems=tuple(problems),
    )


def auth_headers(config: ServerConfig, token: str | None) -> dict[str, str]:
    """The header the runtime sends for ``token`` (read by the caller from ``auth.env``)."""
    if not token:
        return {}
    if config.auth_type in {"bearer", "oauth"}:
        return {"Authorization": f"Bearer {token}"}
    if config.auth_type in {"api_key", "apikey", "key"}:
        return {config.auth_header or "X-API-Key": token}
    if config.auth_type == "header" and config.auth_header:
        return {config.auth_header: token}
    return {}
