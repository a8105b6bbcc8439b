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
MIN_CASES = 9

#: KDCube's own tool modules that import under the recorder's stand-ins (the workspace example's
#: python connections).
MODULES = ("io_tools", "ctx_tools", "exec_tools", "web_tools", "rendering_tools")
_TOOLS = "kdcube_ai_app.apps.chat.sdk.tools"

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


def _module_entries(rt: Any, name: str) -> list[dict[str, Any]]:
    """``ToolSubsystem._introspect_module`` on the real module: ids, descriptions, parameter
    names, intrinsic traits."""
    import importlib

    from conformance.runtime_policy import _subsystem

    module_name = f"{_TOOLS}.{name}"
    module = importlib.import_module(module_name)
    # use_sk False on both sides: semantic_kernel is not installed in the recorder (its
    # ``kernel`` would be a stand-in), so both read the modules' own tools.
    entries = _subsystem(rt, {})._introspect_module(module, module_name, name, False)
    return [
        {
            "id": entry["id"],
            "description": entry["desc"],
            "params": [p["name"] for p in entry["params"]],
            "tool_traits": (entry.get("metadata") or {}).get("tool_traits") or {},
        }
        for entry in entries
    ]


def _traitdeck_manifest() -> dict[str, Any]:
    """The real ``traitdeck manifest`` process on a policy naming the same modules, run beside
    the runtime (the modules import KDCube, which CI does not have: its answer is recorded)."""
    import json
    import subprocess
    import tempfile

    tools = [
        {"kind": "python", "alias": name, "module": f"{_TOOLS}.{name}", "discovery": "module"}
        for name in MODULES
    ]
    policy = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": tools}}}}}
    code = (
        "import sys; from conformance import stubs; stubs.install(sys.argv[1]); "
        "from policy.cli import main; raise SystemExit(main(sys.argv[2:]))"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as file:
        json.dump(policy, file)
    done = subprocess.run(
        [sys.executable, "-c", code, os.environ["KDCUBE_SRC"], "manifest", file.name,
         "--agent", "main", "--python-path", os.environ["KDCUBE_SRC"]],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip
    os.unlink(file.name)
    if done.returncode != 0:
        raise RuntimeError(f"traitdeck manifest failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance.mcp_examples import EXAMPLES

    cases = []
    for key in EXAMPLES:
        listing = asyncio.run(asyncio.wait_for(_as_sent(key), 60))
        runtime = asyncio.run(asyncio.wait_for(_runtime(rt, key), 60))
        cases.append({"id": key, "input": {"server_id": key, **listing}, "runtime": runtime})
    manifest = _traitdeck_manifest()
    for name in MODULES:
        ours = [
            {
                "id": tool_id,
                "description": entry["description"],
                "params": [p["name"] for p in entry["params"]],
                "tool_traits": entry.get("tool_traits") or {},
            }
            for tool_id, entry in manifest.items()
            if tool_id.startswith(f"{name}.")
        ]
        cases.append(
            {
                "id": f"module:{name}",
                "input": {"module": f"{_TOOLS}.{name}", "traitdeck_manifest": ours},
                "runtime": _module_entries(rt, name),
            }
        )
    return cases


def predict(case: dict[str, Any]) -> list[dict[str, Any]]:
    if "module" in case:
        # Recorded from the real command beside the runtime (see _traitdeck_manifest).
        return list(case["traitdeck_manifest"])
    return _predict_listing(case)


def _predict_listing(case: dict[str, Any]) -> list[dict[str, Any]]:
    """What Traitdeck's discovery stores for the same listing, seen as the runtime sees it: the
    first page's tools as ``mcp.<alias>.<tool>`` (alias ``mcp_<server_id>``)."""
    from discovery.mcp_list import ListedTool, Listing, manifest_entries

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
