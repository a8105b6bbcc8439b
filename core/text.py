"""Text that can be stored and shown: every string must encode as UTF-8.

A JSON ``"\\ud800"`` escape or a YAML ``"\\ud800"`` escape decodes to a lone UTF-16 surrogate, a
Python ``str`` that no page, export or database encoding can write. Every entry point (event
ingest, YAML import, manifests, JSON bodies, the draft services) refuses such text with this one
check, so it is never stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (has no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def find_string(value: Any, bad: Callable[[str], bool]) -> tuple[tuple[Any, ...], bool] | None:
    """Where the first string of ``value`` (walked depth first, keys and values) for which
    ``bad`` holds is: its path of keys and indexes, and whether it is a key; ``None`` when there
    is none. Walks with a stack, never recursion."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if bad(item):
                return path, False
        elif isinstance(item, Mapping):
            children = []
            for key, child in item.items():
                if isinstance(key, str) and bad(key):
                    return (*path, key), True
                children.append(((*path, key), child))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([((*path, i), child) for i, child in enumerate(item)]))
    return None


def find_unencodable(value: Any) -> tuple[tuple[Any, ...], bool] | None:
    """Where the first string of ``value`` that cannot be encoded as UTF-8 is (see
    :func:`find_string`)."""
    return find_string(value, lambda text: not encodable(text))


def find_nul(value: Any) -> tuple[tuple[Any, ...], bool] | None:
    """Where the first string of ``value`` holding a NUL character is (see :func:`find_string`):
    valid UTF-8, but no PostgreSQL text or JSON column can store it."""
    return find_string(value, lambda text: "\x00" in text)


def show_path(path: tuple[Any, ...]) -> str:
    """``("agents", "main", "tools", 0)`` → ``agents.main.tools[0]``; unencodable text escaped."""
    shown = ""
    for key in path:
        if isinstance(key, int) and not isinstance(key, bool):
            shown += f"[{key}]"
            continue
        text = ascii(key)[1:-1] if isinstance(key, str) and not encodable(key) else str(key)
        if len(text) > 40:
            text = text[:37] + "..."
        shown = f"{shown}.{text}" if shown else text
    return shown


def unencodable_path(value: Any, root: str = "the value") -> str | None:
    """A phrase naming the first string in ``value`` that cannot be encoded as UTF-8 (``the key
    agents.x\\ud800``, ``connections[0].alias``), or ``None`` when all can; ``root`` names
    ``value`` itself."""
    found = find_unencodable(value)
    if found is None:
        return None
    path, is_key = found
    where = show_path(path) or root
    return f"the key {where}" if is_key else where


def dot_segment(text: str) -> bool:
    """Whether ``text`` read as a URL path has a ``.`` or ``..`` segment. Browsers resolve those
    (also when written ``%2e``, and with ``\\`` as a separator), so a link built from such text
    would lead elsewhere in the site."""
    if "." not in text and "%" not in text:
        return False  # the common case: no dot in any spelling
    normalized = text.replace("\\", "/").lower().replace("%2e", ".")
    return any(segment in (".", "..") for segment in normalized.split("/"))


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun in the right number: ``counted(1, "warning")`` is "1 warning",
    ``counted(3, "warning")`` "3 warnings" (``plural`` when adding an "s" is wrong), never
    "3 warning(s)"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
