"""Paths into a policy document and how people read them.

A path is a tuple of mapping keys (``str``, or any other hashable YAML scalar) and list indexes
(``int``) from the document root, e.g. ``("surfaces", "as_consumer", "agents", "main", "tools", 2,
"tool_traits", "search", "strategy")``. Diagnostics show it below ``surfaces.as_consumer``:
``agents.main.tools[2].tool_traits.search.strategy``; keys that are not plain identifiers are
quoted: ``tool_traits["object.search"]``, ``tool_traits["*"]``.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

Path = tuple[Any, ...]

ROOT: Path = ()
AS_CONSUMER: Path = ("surfaces", "as_consumer")
AGENTS: Path = (*AS_CONSUMER, "agents")

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(path: Path) -> str:
    """Render a path for people, relative to ``surfaces.as_consumer`` when strictly below it.

    Remembered: a policy reaching thousands of tools through one ``*`` entry renders the same
    few paths once per tool (provenance, diagnostics), and that was the largest single cost of
    validating a 5,000-tool discovery. Only paths of ``str`` keys and ``int`` indexes are
    remembered: a cache compares by ``==``, and ``True == 1 == 1.0`` render differently."""
    if all(type(part) is str or type(part) is int for part in path):
        return _formatted(path)
    return _format(path)


def _format(path: Path) -> str:
    if len(path) > len(AS_CONSUMER) and path[: len(AS_CONSUMER)] == AS_CONSUMER:
        path = path[len(AS_CONSUMER) :]
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _is_identifier(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return out


def _is_identifier(part: str) -> bool:
    """Whether a key shows bare; remembered, since every path repeats the same few keys."""
    known = _IDENTIFIERS.get(part)
    if known is None:
        if len(_IDENTIFIERS) >= 8192:
            _IDENTIFIERS.clear()
        known = _IDENTIFIERS[part] = _IDENTIFIER.match(part) is not None
    return known


_IDENTIFIERS: dict[str, bool] = {}
_formatted = functools.lru_cache(maxsize=8192)(_format)
