"""The one walk behind every JSON limit: what it finds first, and where."""

from __future__ import annotations

from typing import Any

import pytest

from core.json_limits import json_problem, nests_deeper
from core.numbers import find_unbounded
from core.vocabulary import MAX_DEPTH, MAX_MAGNITUDE, MAX_STORED_INT


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "kind", "path"),
    [
        ({"a": ["x", "b\x00"]}, "nul", ("a", 1)),
        ({"a": {"k\x00": 1}}, "nul_key", ("a",)),
        ({"a": [MAX_STORED_INT + 1]}, "integer", ("a", 0)),
        ({"a": -MAX_STORED_INT - 1}, "integer", ("a",)),
        ({"a": float("nan")}, "not_finite", ("a",)),
        ({"a": _nested(MAX_DEPTH)}, "too_deep", ("a", *(0,) * (MAX_DEPTH - 1))),
        ({"a": {1, 2}}, "not_json", ("a",)),
    ],
)
def test_it_names_the_first_problem_and_where(value: Any, kind: str, path: tuple[Any, ...]) -> None:
    found = json_problem(value, json_types=True)
    assert found is not None
    assert (found.kind, found.path) == (kind, path)


def test_it_finds_the_first_problem_in_document_order() -> None:
    found = json_problem({"a": "x\x00", "b": float("inf")})
    assert found is not None
    assert found.path == ("a",)


def test_it_passes_what_json_can_store() -> None:
    assert json_problem({"a": [MAX_STORED_INT, -MAX_STORED_INT, 1.5, None, True, "é"]}) is None
    assert json_problem(_nested(MAX_DEPTH - 1)) is None


def test_the_two_integer_bounds_are_two_named_limits() -> None:
    typed = {"n": MAX_MAGNITUDE}
    assert json_problem(typed) is None  # storable: fits 64 bits
    assert find_unbounded(typed) == ("n",)  # but past what people type


def test_nesting_alone_ignores_the_other_limits() -> None:
    assert not nests_deeper({"a": "\x00", "b": float("nan"), "c": 10**40})
    assert nests_deeper(_nested(5), 4)
    assert not nests_deeper(_nested(4), 4)
