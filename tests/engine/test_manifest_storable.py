"""The manifest's fast storability check never lets through what the full walks refuse."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.text import unencodable_path
from engine.tools.manifest import MAX_DEPTH, _plainly_storable, _unstorable

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(codec=None, exclude_categories=())),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(VALUES)
def test_it_passes_only_what_the_walks_accept(data: Any) -> None:
    if _plainly_storable(data):
        assert _unstorable(data) is None
        assert unencodable_path(data, root="m") is None


def nested(depth: int) -> Any:
    data: Any = "leaf [{"
    for _ in range(depth):
        data = {"k]": [data]}
    return data


def test_it_counts_depth_like_the_walk() -> None:
    for depth in (MAX_DEPTH // 2 - 1, MAX_DEPTH // 2, MAX_DEPTH // 2 + 1):
        data = nested(depth)  # 2 containers per level
        assert _plainly_storable(data) == (_unstorable(data) is None)
    assert not _plainly_storable({"a": "x\x00"})
    assert not _plainly_storable({"a": "\ud800"})
    assert not _plainly_storable({"a": float("nan")})
