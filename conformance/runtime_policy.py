"""What the runtime makes of a policy: the model-facing tools of one agent, with their traits, as
the runtime's own config loader and tool subsystem compute them.

Glue (listed in the README): the runtime loads python modules and asks MCP servers for their
tools; neither exists here. A python connection's callables are therefore its ``allowed`` names
plus the manifest's names for that alias (what the module would offer), each built into an entry
by the runtime's own ``ToolSubsystem._introspect_module`` from a stand-in module whose
``list_tools()`` carries the manifest traits as tool metadata (the code layer). MCP tools are the
connection's ``allowed`` names (all manifest names under ``*``), given their traits by the runtime's
``ToolSubsystem._apply_entry_tool_traits``. The named-service module is the runtime's real one.
Filtering and order come from the runtime's ``ToolSubsystem._filter_entries``.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from conformance.harness import Runtime


class _Log:
    def log(self, *args: Any, **kwargs: Any) -> None:
        return None


def _subsystem(rt: Runtime, tool_traits: Mapping[str, Any]) -> Any:
    cls = rt.subsystem.ToolSubsystem
    sub = cls.__new__(cls)
    sub.log = _Log()
    # The same normalisation ToolSubsystem.__init__ applies to its ``tool_traits`` argument.
    sub._tool_traits = {
        str(tool_id or "").strip(): rt.traits.normalize_tool_traits(traits)
        for tool_id, traits in (tool_traits or {}).items()
        if str(tool_id or "").strip() and rt.traits.normalize_tool_traits(traits)
    }
    sub.tools_info = []
    sub._mcp_entries = []
    return sub


def _stand_in_module(alias: str, names: list[str], manifest: Mapping[str, Any]) -> Any:
    module = types.ModuleType(f"traitdeck_stand_in_{alias}")

    def make(name: str) -> Any:
        def fn() -> None:
            return None

        fn.__name__ = name
        return fn

    registry: dict[str, dict[str, Any]] = {}
    for name in names:
        meta: dict[str, Any] = {"callable": make(name), "description": ""}
        code = manifest.get(f"{alias}.{name}")
        if isinstance(code, Mapping) and isinstance(code.get("tool_traits"), Mapping):
            meta["tool_traits"] = dict(code["tool_traits"])
        registry[name] = meta
    module.list_tools = lambda: registry  # type: ignore[attr-defined]
    return module


def _manifest_names(manifest: Mapping[str, Any], prefix: str, *, dotted: bool) -> list[str]:
    names: list[str] = []
    for tool_id in manifest:
        if isinstance(tool_id, str) and tool_id.startswith(prefix):
            name = tool_id[len(prefix) :]
            if name and (dotted or "." not in name) and name not in names:
                names.append(name)
    return names


def recorded_adapters(rt: Runtime, name: str, agent_id: str = "main") -> list[dict[str, Any]]:
    """The adapters of ``agent_id`` under the recorded policy ``name`` (``round_policies``),
    with that policy's manifest."""
    from conformance import round_policies

    recorded = round_policies.policies()[name]
    return agent_adapters(rt, recorded["policy"], agent_id, manifest=recorded["manifest"])


def generated_cases(
    rt: Runtime, name: str, generate: Callable[[list[str]], list[dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The adapters of agent ``main`` under the recorded policy ``name``, and the cases
    ``generate`` makes over their tool ids."""
    adapters = recorded_adapters(rt, name)
    return adapters, generate([adapter["id"] for adapter in adapters])


def agent_adapters(
    rt: Runtime,
    policy: Mapping[str, Any],
    agent_id: str,
    *,
    manifest: Mapping[str, Any] | None = None,
    role: str | None = "parent",
) -> list[dict[str, Any]]:
    """The agent's adapters (configured tools, in the runtime's order), then the react built-ins
    for ``role``: the list the runtime indexes by id for the overseer and renders as its
    catalog."""
    manifest = manifest or {}
    cfg = rt.config.agent_tool_config_from_bundle_props(policy, agent_id)
    sub = _subsystem(rt, cfg.tool_traits)
    rt.ns_tools.REGISTRY.clear()
    rt.ns_tools.REGISTRY.update({"bundle_props": policy, "client_id": agent_id})
    ns_alias = rt.solver.__dict__.get("NAMED_SERVICE_TOOLS_ALIAS") or "named_services"
    for spec in cfg.tool_specs:
        alias = str(spec.get("alias") or "")
        if spec.get("module") == ns_module_name(rt) or _is_named_service_spec(rt, spec):
            module: Any = rt.ns_tools
        else:
            allowed = cfg.allowed_tool_names_by_alias.get(alias) or []
            names = [n for n in allowed if "." not in n]
            for name in _manifest_names(manifest, f"{alias}.", dotted=False):
                if name not in names:
                    names.append(name)
            module = _stand_in_module(alias, names, manifest)
        sub.tools_info.extend(sub._introspect_module(module, module.__name__, alias, False))
    del ns_alias
    for spec in cfg.mcp_tool_specs:
        alias = str(spec.get("alias") or "")
        tools = [str(t) for t in spec.get("tools") or []]
        names = (
            _manifest_names(manifest, f"mcp.{alias}.", dotted=True)
            if "*" in tools
            else [t for t in tools if t != "*"]
        )
        for name in names:
            entry: dict[str, Any] = {
                "id": f"mcp.{alias}.{name}",
                "plugin_alias": alias,
                # Every MCP tool is async (mcp_tools_subsystem._mk_mcp_entry): " [async]" in the
                # compact catalog.
                "is_async": True,
                "doc": {"purpose": "", "args": {}, "returns": ""},
            }
            code = manifest.get(entry["id"])
            raw = None
            if isinstance(code, Mapping) and isinstance(code.get("tool_traits"), Mapping):
                raw = {"tool_traits": dict(code["tool_traits"])}
            sub._mcp_entries.append(
                sub._apply_entry_tool_traits(entry, alias=alias, tool_name=name, raw=raw)
            )
    adapters = sub._filter_entries(
        cfg.allowed_plugins,
        allowed_tool_names_by_alias=cfg.allowed_tool_names_by_alias,
    )
    return [dict(a) for a in adapters]


def ns_module_name(rt: Runtime) -> str:
    return rt.ns_tools.__name__


def _is_named_service_spec(rt: Runtime, spec: Mapping[str, Any]) -> bool:
    ref = str(spec.get("module") or spec.get("ref") or "")
    return "named_services_providers" in ref
