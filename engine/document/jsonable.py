"""Policy values made safe for JSON output (CLI ``--format json`` and the HTTP API).

YAML keys and values may be dates, numbers, booleans or ``null``; ``json.dumps`` refuses a date
key and writes ``Infinity`` for ``.inf`` (not JSON). Traitdeck prints what the runtime would see,
so such values are spelled as Python spells them (``str``) rather than dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def jsonable(value: Any) -> Any:
    """``value`` with every mapping key a string and every leaf a JSON scalar.

    Keys become ``str(key)``: the same spelling the provenance of a trait key uses, so a
    trait and its provenance still pair up. Strings, finite numbers, booleans and ``None`` are
    kept; anything else (dates, non-finite floats) becomes its ``str``.
    """
    if isinstance(value, Mapping):
        return {_key(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return str(value)


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(key)


def json_kind(value: Any) -> str:
    """What kind of JSON value this is, in words, for "… must be X, not <kind>" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def json_text(data: Any) -> str:
    """The JSON the CLI prints (the web playground shows the same text)."""
    return json.dumps(jsonable(data), indent=2, ensure_ascii=False) + "\n"
