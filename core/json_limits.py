"""The limits every JSON value Traitdeck stores or returns is held to, defined once.

An API body (``web.api_io.read_json``), a tool manifest (``engine.tools.manifest``) and a
recorded event (ingest) are all stored as JSON and shown again, so all three are bounded alike.
(A YAML policy document has its own, looser bound, ``policy.domain.yaml_io.MAX_DEPTH``: its
composer is what it protects.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import orjson

#: The deepest nesting a stored JSON value may have: far past any policy, manifest or round
#: (about ten levels), far short of what exhausts the stack of the code that encodes or shows it.
MAX_DEPTH: Final = 64
#: The largest integer a stored value may hold: the 64 bits databases and JSON clients read.
MAX_STORED_INT: Final = 2**63 - 1


def nests_deeper(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` has lists or objects nested more than ``limit`` levels (walked with a
    stack, never recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    return False


class NotJson(ValueError):
    """The bytes are not one JSON value; the message says why (Python's parser's words)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


#: Every ASCII digit as "0", every other byte as " ": a run of 19 zeros is a number orjson might
#: read differently from Python's parser (an integer past 64 bits becomes a float there).
_DIGIT_RUNS: Final = bytes(48 if 48 <= n <= 57 else 32 for n in range(256))
_LONG_NUMBER: Final = b"0" * 19


def decode_json(body: bytes) -> Any:
    """Decode JSON or raise ``NotJson``. NaN and Infinity are not JSON (RFC 8259), though
    Python's parser takes them by default; a hostile nesting depth is refused, never a crash.

    orjson decodes first (a third of the time on an ingest batch) when no run of 19 digits could
    hold an integer it reads differently; anything it refuses (a lone surrogate escape, a number
    past a double's range, a byte-order mark, deep nesting, NaN) goes to Python's parser, which
    decides and words the error, so both paths give the same value or the same refusal."""
    if _LONG_NUMBER not in body.translate(_DIGIT_RUNS):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotJson(str(exc)) from exc
    except RecursionError:
        raise NotJson("it nests too deeply") from None
