"""The limits every JSON value Traitdeck stores or returns is held to, defined once.

An API body (``web.api_io.read_json``), a tool manifest (``engine.tools.manifest``) and a
recorded event (ingest) are all stored as JSON and shown again, so all three are bounded alike, by
one walk (:func:`json_problem`); each caller words what it finds. The limits themselves are in
``core.vocabulary``.
(A YAML policy document has its own, looser bound, ``policy.domain.yaml_io.MAX_DEPTH``: its
composer is what it protects.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple

import orjson

from core.vocabulary import MAX_DEPTH, MAX_STORED_INT

#: What a walk found wrong, first: a NUL in a string or a key, an integer past the bound, a float
#: JSON cannot hold (NaN, Infinity), nesting past the depth, or a value of no JSON type.
ProblemKind = Literal["nul", "nul_key", "integer", "not_finite", "too_deep", "not_json"]


class JsonProblem(NamedTuple):
    """The first thing in a value that keeps it from being stored as JSON and shown again:
    ``kind``, ``path`` (keys and indexes from the top; for a key, the path of its object) and
    the offending ``value``. Each caller words it for its own reader."""

    kind: ProblemKind
    path: tuple[Any, ...]
    value: Any


def json_problem(
    value: Any,
    *,
    max_int: int | None = MAX_STORED_INT,
    max_depth: int | None = MAX_DEPTH,
    text: bool = True,
    floats: bool = True,
    json_types: bool = False,
) -> JsonProblem | None:
    """The first problem of ``value`` under the limits asked for, or ``None``: the one walk
    (with a stack, never recursion) behind every JSON limit. ``max_int``: the largest magnitude
    an integer (a value or a key) may have (``None``: any); ``max_depth``: the deepest nesting
    (``None``: any); ``text``: refuse a NUL in a string or key (PostgreSQL cannot store one);
    ``floats``: refuse NaN and Infinity (not JSON); ``json_types``: refuse any value that is
    not a JSON type (only Python callers can pass one)."""
    stack: list[tuple[tuple[Any, ...], Any, int]] = [((), value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if isinstance(item, str):
            if text and "\x00" in item:
                return JsonProblem("nul", path, item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if max_int is not None and not -max_int <= item <= max_int:
                return JsonProblem("integer", path, item)
        elif isinstance(item, float):
            if floats and not math.isfinite(item):
                return JsonProblem("not_finite", path, item)
        elif isinstance(item, Mapping | list | tuple):
            if max_depth is not None and depth >= max_depth:
                return JsonProblem("too_deep", path, item)
            pairs = item.items() if isinstance(item, Mapping) else enumerate(item)
            children = []
            for key, child in pairs:
                if isinstance(item, Mapping):
                    if text and isinstance(key, str) and "\x00" in key:
                        return JsonProblem("nul_key", path, key)
                    if (
                        max_int is not None
                        and isinstance(key, int)
                        and not isinstance(key, bool)
                        and not -max_int <= key <= max_int
                    ):
                        return JsonProblem("integer", path, key)
                children.append(((*path, key), child, depth + 1))
            stack.extend(reversed(children))
        elif json_types:
            return JsonProblem("not_json", path, item)
    return None


def nests_deeper(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` has lists or objects nested more than ``limit`` levels."""
    found = json_problem(value, max_int=None, max_depth=limit, text=False, floats=False)
    return found is not None


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
