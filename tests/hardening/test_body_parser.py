"""The one body reader decodes with orjson where it can and with Python's parser otherwise: for
any body the value is the one Python's parser gives, and a body it refuses is the same 400."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ninja.errors import HttpError

from web.api_io import parse_json

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**19])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["\ud800", "\x00", "é😀", "1234567890123456789012"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _reference(body: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        return ("value", json.loads(body, parse_constant=refuse))
    except (ValueError, RecursionError):
        return ("400", None)


def _parsed(body: bytes) -> Any:
    try:
        return ("value", parse_json(body))
    except HttpError as exc:
        return (str(exc.status_code), None)


def _same(a: Any, b: Any) -> bool:
    # repr tells 1 from 1.0 and True from 1, and keeps key order; NaN is not equal to itself.
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return repr(a) == repr(b)


@settings(max_examples=600, deadline=None)
@given(
    VALUES,
    st.booleans(),
    st.sampled_from([None, (",", ":"), (", ", ": ")]),
    st.sampled_from(["", "\ufeff", " \n"]),
)
def test_any_body_decodes_as_pythons_parser_decodes_it(
    value: Any, ascii_only: bool, separators: Any, prefix: str
) -> None:
    text = prefix + json.dumps(value, ensure_ascii=ascii_only, separators=separators)
    body = text.encode("utf-8", "surrogatepass")
    expected, got = _reference(body), _parsed(body)
    assert got[0] == expected[0]
    assert _same(got[1], expected[1])


@pytest.mark.parametrize(
    "body",
    [
        b'{"n": 18446744073709551616}',
        b'{"n": -9223372036854775809}',
        b'{"n": 123456789012345678901}',
    ],
)
def test_an_integer_past_64_bits_stays_an_integer(body: bytes) -> None:
    (value,) = parse_json(body).values()
    assert isinstance(value, int)
    assert value == json.loads(body)["n"]
