"""Counts written as words: never "3 warning(s)"."""

from __future__ import annotations

from core.text import counted


def test_a_count_takes_the_noun_in_its_number() -> None:
    assert counted(1, "warning") == "1 warning"
    assert counted(3, "warning") == "3 warnings"
    assert counted(0, "regression case") == "0 regression cases"
    assert counted(2, "reply", "replies") == "2 replies"
