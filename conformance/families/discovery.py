"""KDCube's own example MCP servers (``conformance.mcp_examples``: the ``build_*_mcp_app``
factories on the v1 SDK, served over stdio in the recorder's venv): what the runtime's MCP
adapter reads from each (``PythonSDKMCPAdapter.list_tools`` and the subsystem's
``_params_from_schema`` — names, descriptions, parameters, first page only) against what
Traitdeck's discovery reads from the same listing as the server sent it.

The listing as sent (annotations included, which the runtime drops) is kept as the case input,
so Traitdeck's tests also hold real servers' annotations (``named_services`` mixes reads and
writes)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

NAME = "discovery"
MIN_CASES = 4

ROOT = Path(__file__).resolve().parents[2]


def _argv(key: str) -> tuple[str, list[str]]:
    return sys.executable, ["-m", "conformance.mcp_examples", key]


def _child_env() -> dict[str, str]:
    return {"KDCUBE_SRC": os.environ["KDCUBE_SRC"], "PYTHONPATH": str(ROOT)}


async def _as_sent(key: str) -> dict[str, Any]:
    """The first page of tools/list exactly as sent, read with the v1 SDK's own session."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command, args = _argv(key)
    params = StdioServerParameters(command=command, args=args, env=_child_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        page = await session.list_tools()
        return {
            "tools": [
                tool.model_dump(by_alias=True, exclude_unset=True, mode="json")
                for tool in page.tools
            ],
            "next_cursor": page.nextCursor,
        }


async def _runtime(rt: Any, key: str) -> list[dict[str, Any]]:
    import importlib

    adapter_mod = importlib.import_module("kdcube_ai_app.apps.chat.sdk.runtime.mcp.mcp_adapter")
    subsystem = importlib.import_module(
        "kdcube_ai_app.apps.chat.sdk.runtime.mcp.mcp_tools_subsystem"
    )
    command, args = _argv(key)
    spec = adapter_mod.MCPServerSpec(
        server_id=key, display_name=key, transport="stdio", command=command, args=args,
        env=_child_env(),
    )  # fmt: skip
    tools = await adapter_mod.PythonSDKMCPAdapter(spec).list_tools()
    out = []
    for tool in tools:
        params = subsystem._params_from_schema(tool.params_schema)
        entry = subsystem._mk_mcp_entry(alias=f"mcp_{key}", tool=tool, server_id=key, params=params)
        out.append(
            {
                "id": entry["id"],
                "description": tool.description,
                "params": [[p["name"], p["required"]] for p in params],
            }
        )
    return out


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance.mcp_examples import EXAMPLES

    cases = []
    for key in EXAMPLES:
        listing = asyncio.run(asyncio.wait_for(_as_sent(key), 60))
        runtime = asyncio.run(asyncio.wait_for(_runtime(rt, key), 60))
        cases.append({"id": key, "input": {"server_id": key, **listing}, "runtime": runtime})
    return cases


def predict(case: dict[str, Any]) -> list[dict[str, Any]]:
    """What Traitdeck's discovery stores for the same listing, seen as the runtime sees it: the
    first page's tools as ``mcp.<alias>.<tool>`` (alias ``mcp_<server_id>``)."""
    from policy.discovery.mcp_list import ListedTool, Listing, manifest_entries

    listing = Listing(
        tools=tuple(
            ListedTool(
                name=tool["name"],
                description=tool.get("description"),
                input_schema=tool.get("inputSchema") or {},
                annotations=tool.get("annotations"),
                page=1,
            )
            for tool in case["tools"]
        ),
        pages=1,
        seconds=0.0,
    )
    server = case["server_id"]
    entries = manifest_entries(
        listing, alias=f"mcp_{server}", server_id=server, by="", at="", transport="stdio"
    )
    return [
        {
            "id": tool_id,
            "description": entry["description"],
            "params": [[p["name"], p["required"]] for p in entry["params"]],
        }
        for tool_id, entry in entries.items()
    ]
