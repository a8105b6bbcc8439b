"""Python tool modules introspected the way the runtime does (DESIGN §7,
``runtime/tool_subsystem.py::_introspect_module``), for ``traitdeck manifest``. No Django.

A python connection names ``module`` (imported through ``sys.path``) or ``ref`` (a file,
resolved against the bundle root). Its tools are, in the runtime's order: the semantic kernel's
functions when ``discovery`` is ``semantic_kernel`` (the default) and the module has a
``kernel``; else ``list_tools()`` when the module has one; else every public callable of the
module's ``tools`` attribute, or of the module (``dir()``: imported callables included, as the
runtime's reflection does). A tool's intrinsic traits are its ``list_tools()`` metadata
``tool_traits`` with the callable's ``@tool_trait`` (``__kdcube_tool_traits__``) over them, per
top-level key.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from engine.tools.loading import PYTHON
from engine.tools.resolution import AgentResolution

TOOL_TRAITS_ATTR: Final = "__kdcube_tool_traits__"


@dataclass
class ModulesManifest:
    """The manifest of an agent's python connections, and the connections that failed."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (connection label, the exception's first line).
    failures: list[tuple[str, str]] = field(default_factory=list)


def python_manifest(
    resolution: AgentResolution, *, bundle_root: Path | None, python_path: Iterable[str] = ()
) -> ModulesManifest:
    out = ModulesManifest()
    for directory in reversed(list(python_path)):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    for connection in resolution.connections:
        if connection.kind != PYTHON or not connection.alias:
            continue
        raw = connection.raw
        label = f"tools[{connection.index}] ({connection.alias})"
        try:
            module, name = _load(raw, bundle_root)
            discovery = str(raw.get("discovery") or "semantic_kernel").strip().lower()
            tools = _introspect(module, use_sk=discovery == "semantic_kernel")
        except BaseException as exc:  # an import may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            out.failures.append((label, _first_line(exc)))
            continue
        for fn_name, description, fn, raw_meta in tools:
            traits = _traits(raw_meta, fn)
            entry: dict[str, Any] = {
                "description": (description or "").strip(),
                "params": _params(fn),
                "source": {"kind": "module", "module": name, "connection": connection.index},
            }
            if traits:
                entry["tool_traits"] = traits
            out.entries[f"{connection.alias}.{fn_name}"] = entry
    return out


def _load(raw: Mapping[Any, Any], bundle_root: Path | None) -> tuple[ModuleType, str]:
    module = raw.get("module")
    if module:
        return importlib.import_module(str(module)), str(module)
    ref = raw.get("ref")
    if not ref:
        raise ImportError("the connection has neither module nor ref (the runtime skips it)")
    path = Path(str(ref))
    if not path.is_absolute():
        if bundle_root is None:
            raise ImportError(f"ref {ref} is relative: give --bundle-root")
        path = bundle_root / path
    path = path.resolve()
    if not path.is_file():
        raise ImportError(f"ref {ref} -> {path} does not exist")
    name = "traitdeck_ref_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    spec.loader.exec_module(loaded)
    return loaded, str(path)


Tool = tuple[str, str, Any, Mapping[str, Any] | None]


def _introspect(module: ModuleType, *, use_sk: bool) -> list[Tool]:
    owner = getattr(module, "tools", module)
    if use_sk and hasattr(module, "kernel"):
        metas = module.kernel.get_full_list_of_function_metadata()
        out: list[Tool] = []
        for meta in metas:
            data = meta.model_dump() if hasattr(meta, "model_dump") else dict(vars(meta))
            name = data.get("name")
            if name:
                out.append(
                    (
                        str(name),
                        str(data.get("description") or ""),
                        getattr(owner, name, None),
                        None,
                    )
                )
        return out
    if hasattr(module, "list_tools"):
        registry = module.list_tools()
        out = []
        for fn_name, meta in registry.items():
            meta = meta if isinstance(meta, Mapping) else {}
            fn = meta.get("callable") or getattr(owner, fn_name, None)
            description = (
                meta.get("description")
                or getattr(fn, "description", "")
                or (getattr(fn, "__doc__", "") or "")
            )
            out.append((str(fn_name), str(description), fn, meta))
        return out
    out = []
    for name in dir(owner):
        if name.startswith("_"):
            continue
        fn = getattr(owner, name, None)
        if not callable(fn):
            continue
        description = getattr(fn, "description", "") or (getattr(fn, "__doc__", "") or "")
        out.append((name, str(description), fn, None))
    return out


def _traits(meta: Mapping[str, Any] | None, fn: Any) -> dict[str, Any]:
    """Metadata ``tool_traits`` with the decorator's keys over them (each key replaced whole)."""
    base = meta.get("tool_traits") or meta.get("tool_trait") if meta else None
    decorated = getattr(fn, TOOL_TRAITS_ATTR, None)
    merged: dict[str, Any] = {}
    for source in (base, decorated):
        if isinstance(source, Mapping):
            merged.update({str(k): v for k, v in source.items() if str(k or "").strip()})
    return merged


def _params(fn: Any) -> list[dict[str, Any]]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    out = []
    for param in signature.parameters.values():
        if param.name == "self":
            continue
        item: dict[str, Any] = {"name": param.name}
        if param.annotation is not inspect.Parameter.empty:
            item["annotation"] = getattr(param.annotation, "__name__", str(param.annotation))
        out.append(item)
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")[:300]
