from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.timewindow import TimeWindowError, parse_moment

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15m", NOW - timedelta(minutes=15)),
        ("1h", NOW - timedelta(hours=1)),
        ("24h", NOW - timedelta(hours=24)),
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(weeks=2)),
        ("2026-11-30", datetime(2026, 11, 30, tzinfo=UTC)),
        ("2026-11-30T08:15", datetime(2026, 11, 30, 8, 15, tzinfo=UTC)),
        ("2026-11-30T08:15:00Z", datetime(2026, 11, 30, 8, 15, tzinfo=UTC)),
        ("2026-11-30T09:15:00+01:00", datetime(2026, 11, 30, 8, 15, tzinfo=UTC)),
        ("2026-11-30T09:15:00 01:00", datetime(2026, 11, 30, 8, 15, tzinfo=UTC)),  # "+" as space
    ],
)
def test_it_reads_spans_and_iso_moments(text: str, expected: datetime) -> None:
    assert parse_moment("since", text, now=NOW) == expected


@pytest.mark.parametrize("text", ["", "  ", None])
def test_it_reads_nothing_as_no_bound(text: str | None) -> None:
    assert parse_moment("since", text, now=NOW) is None


@pytest.mark.parametrize("text", ["yesterday", "7x", "-7d", "2026W01", "2026-13-01", "999999w"])
def test_it_refuses_anything_else_with_a_sentence_naming_the_field(text: str) -> None:
    with pytest.raises(TimeWindowError, match="^since "):
        parse_moment("since", text, now=NOW)
