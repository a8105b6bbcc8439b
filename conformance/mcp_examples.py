"""KDCube's own example MCP servers, served over stdio for the ``discovery`` family.

Run in the recorder's venv (which has the v1 SDK, ``mcp<2``, that these factories import):
``python -m conformance.mcp_examples KEY``. Each ``build_*_mcp_app(...)`` factory is given
stand-in providers that are never called (listing tools calls no tool), and the FastMCP app it
returns is run over stdio. The factories are imported from ``KDCUBE_SRC``, never copied.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Any

BUNDLES = "kdcube_ai_app/apps/chat/sdk/examples/bundles"

#: key → (file under the examples, factory, keyword arguments besides ``name``).
EXAMPLES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "node_bridge": (
        "node.bridge.mcp@2026-04-24/node_mcp_tools.py",
        "build_node_bridge_mcp_app",
        ("bridge_provider",),
    ),
    "user_memories": (
        "user-memories@2026-06-26/memory_mcp_tools.py",
        "build_user_memories_mcp_app",
        ("store_factory", "scope_factory", "read_user_ids_factory"),
    ),
    "conversations": (
        "kdcube-services@1-0/surfaces/mcp/conversations.py",
        "build_conversations_mcp_app",
        ("read_service_factory", "current_user_id_factory"),
    ),
    "named_services": (
        "kdcube-services@1-0/surfaces/mcp/named_services.py",
        "build_named_services_mcp_app",
        ("config_factory", "tenant_factory", "project_factory", "request", "bridge_factory"),
    ),
}


def _never_called(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("a stand-in provider was called while listing tools")


def build(key: str) -> Any:
    src = Path(os.environ["KDCUBE_SRC"])
    # The SDK is imported before the stand-in hook: its optional imports (rich for logging)
    # must find nothing, not a stand-in.
    import mcp.server.fastmcp  # noqa: F401
    import mcp.types  # noqa: F401

    from conformance import stubs

    stubs.install(str(src))
    relative, factory, kwargs = EXAMPLES[key]
    path = src / BUNDLES / relative
    spec = importlib.util.spec_from_file_location(f"kdcube_example_{key}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    args = {name: (None if name == "request" else _never_called) for name in kwargs}
    app = getattr(module, factory)(name=f"kdcube-{key}", **args)
    # FastMCP sets up logging with rich when it can import it: here it imported a stand-in, whose
    # handler has no usable level. Plain stderr logging instead (stdout is the protocol).
    logging.root.handlers = [logging.StreamHandler(sys.stderr)]
    logging.root.setLevel(logging.WARNING)
    return app


if __name__ == "__main__":
    build(sys.argv[1]).run("stdio")
