"""Text that can be stored and shown: every string must encode as UTF-8.

A JSON ``"\\ud800"`` escape or a YAML ``"\\ud800"`` escape decodes to a lone UTF-16 surrogate, a
Python ``str`` that no page, export or database encoding can write. Every entry point (event
ingest, YAML import, manifests, JSON bodies, the draft services) refuses such text with this one
check, so it is never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (has no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _step(path: str, key: object) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    shown = ascii(key) if isinstance(key, str) and not encodable(key) else str(key)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{path}.{shown}" if path else shown


def unencodable_path(value: Any, root: str = "") -> str | None:
    """The path (``agents.main.connections[0].alias``) of the first string — key or value —
    in ``value`` that cannot be encoded as UTF-8, or ``None`` when all can. ``root`` names the
    value itself in the answer (default: ``the value``)."""
    stack: list[tuple[str, Any]] = [(root, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not encodable(item):
                return path or "the value"
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if isinstance(key, str) and not encodable(key):
                    return f"the key {_step(path, key)}"
                stack.append((_step(path, key), child))
        elif isinstance(item, list | tuple):
            stack.extend((_step(path, index), child) for index, child in enumerate(item))
    return None
