"""Bounded numbers: the one parser for whole numbers people type, and the one bound on numbers
a document may hold.

Python converts any length of digits to an ``int`` (until its 4,300-digit string limit raises
``ValueError``), and an ``int`` beyond a float's range makes ``math.isfinite`` raise
``OverflowError``. Input is therefore checked *before* it is converted: text by its characters
and length (:func:`parse_whole`), parsed documents (YAML, JSON) by magnitude
(:func:`is_bounded`, :func:`find_unbounded`). No Django here: the web layer, the CLI and the
domain all use it.
"""

from __future__ import annotations

from typing import Any, Final

from core.json_limits import json_problem
from core.vocabulary import MAX_DIGITS, MAX_MAGNITUDE

#: What a refusal says about the bound.
BOUND_TEXT: Final = f"numbers have at most {MAX_DIGITS} digits"


def parse_whole(text: object, *, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` as a non-negative whole number, or ``None``: ASCII digits only (``"²"`` and
    ``"٣"`` are digits to ``str.isdigit`` but not here), 1 to ``max_digits`` of them, checked
    before ``int()`` ever sees the text."""
    if not isinstance(text, str) or not 1 <= len(text) <= max_digits:
        return None
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def is_bounded(value: object) -> bool:
    """Whether a parsed value is safe to compute with and to print: any non-number, any float
    (``inf`` included: floats never overflow), an int below :data:`MAX_MAGNITUDE`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return -MAX_MAGNITUDE < value < MAX_MAGNITUDE
    return True


def find_unbounded(data: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """The path of the first integer in a parsed document beyond the bound (for a key, the path
    of its mapping), or ``None``."""
    found = json_problem(data, max_int=MAX_MAGNITUDE - 1, max_depth=None, text=False, floats=False)
    return None if found is None else (*path, *found.path)


def show_number(value: object) -> str:
    """``repr`` of a value, except an unbounded int, which ``repr`` may refuse to write (over
    4,300 digits) and nobody can read: it is described by its size."""
    if isinstance(value, int) and not is_bounded(value):
        # log10(2) ≈ 0.30103: the digit count without converting (which may itself refuse).
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    return repr(value)
