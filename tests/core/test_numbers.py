from __future__ import annotations

import pytest

from core.numbers import find_unbounded, is_bounded, parse_whole, show_number
from core.vocabulary import MAX_DIGITS


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("42", 42), ("9" * MAX_DIGITS, int("9" * MAX_DIGITS)), ("007", 7)],
)
def test_it_reads_ascii_digits(text: str, expected: int) -> None:
    assert parse_whole(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1_000",
        "²",
        "٣",
        "0x10",
        "1e3",
        "9" * (MAX_DIGITS + 1),
        "1" * 5000,
    ],
)
def test_it_refuses_anything_else_before_converting(text: str) -> None:
    assert parse_whole(text) is None


def test_it_refuses_non_text() -> None:
    assert parse_whole(None) is None
    assert parse_whole(12) is None


def test_it_bounds_parsed_documents() -> None:
    huge = 10**400
    for value in (1.5, float("inf"), "x", True, -(10**17)):
        assert is_bounded(value)
    for value in (huge, -huge):
        assert not is_bounded(value)
    assert find_unbounded({"a": [1, {"b": 2}]}) is None
    assert find_unbounded({"a": [1, {"timeout_s": huge}]}) == ("a", 1, "timeout_s")
    assert find_unbounded({"a": {huge: 1}}) == ("a",)


def test_it_describes_an_unprintable_number_by_its_size() -> None:
    assert show_number(2**20000).startswith("a number of about 6021 digits")
    assert show_number(12) == "12"
