"""The one reader of a ``since`` / ``until`` time-window bound (the rounds API, the live and
history pages, the impact page, the audit log and its API): an ISO 8601 date or date-time, or a
span back from now (``15m``, ``1h``, ``24h``, ``7d``, ``2w``: a whole number of s, m, h, d or w).

One zone rule: a date or date-time without an offset is UTC, the server's time zone
(``TIME_ZONE = "UTC"``, fixed in ``config/settings.py``); one with an offset (``Z``, ``+01:00``)
is converted to UTC. A ``+`` that a query string turned into a space is read as ``+``.

Pure (no Django): the caller passes ``now``, so the rule is tested without a clock. The one
writer of a stored time, :func:`format_ts`, lives beside the reader.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_SPAN = re.compile(r"([0-9]{1,6})\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# A "+" in a query string arrives as a space: "2026-12-01T10:00:00 01:00".
_SPACE_FOR_PLUS = re.compile(r"(T\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?) (\d{2}(?::?\d{2})?)$")
# datetime.fromisoformat reads far more than dates (e.g. "2026W01"); keep to what we document.
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.,]+)?([Zz]|[+-][0-9:]+)?")


class TimeWindowError(ValueError):
    """The value is neither a span nor an ISO 8601 moment (the message is a plain sentence)."""


def parse_moment(name: str, value: str | None, *, now: datetime) -> datetime | None:
    """``value`` as an aware UTC moment, or ``None`` when empty. A span means ``now`` minus it;
    a date or date-time without an offset is UTC. Raises :class:`TimeWindowError`."""
    text = (value or "").strip()
    if not text:
        return None
    span = _SPAN.fullmatch(text.lower())
    if span is not None:
        amount, unit = span.groups()
        try:
            return now - timedelta(**{_UNITS[unit]: int(amount)})
        except OverflowError:
            raise TimeWindowError(f"{name} reaches too far back (got {text!r}).") from None
    text = _SPACE_FOR_PLUS.sub(r"\1+\2", text)
    if not _ISO.fullmatch(text):
        raise TimeWindowError(_format_error(name, value or ""))
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise TimeWindowError(_format_error(name, value or "")) from None
    if moment.utcoffset() is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise TimeWindowError(f"{name} is out of range (got {text[:60]!r}).") from None


def _format_error(name: str, value: str) -> str:
    return (
        f"{name} must be an ISO 8601 date or date-time like 2026-12-01T18:00:00Z, or a span"
        f" back from now like 24h or 7d (got {value[:60]!r})."
    )


def format_ts(ts: datetime) -> str:
    """The stored form of a time (events, rounds, the API): UTC, millisecond precision, ``Z``
    suffix."""
    utc = ts.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="milliseconds") + "Z"
