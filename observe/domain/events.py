"""Round events, protocol v1 (DESIGN §4): parse, validate and normalize one posted event.

A runtime (or the built-in simulator) posts JSON events. Each one is checked against the field
rules of §4 and normalized, so that the same event posted twice — once with ``ts`` in epoch
milliseconds, once as an RFC 3339 string, say — compares equal and is stored once. Unknown extra
fields are kept: a newer runtime may send more than this version knows, and dropping data silently
is worse than storing it.

Over 500 lines on purpose: one module per protocol version, its field rules in the order of
DESIGN §4's table, so a rule and the row it implements are read side by side.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, NamedTuple

from core.timewindow import format_ts
from core.vocabulary import (
    ACTION_ACCEPTED,
    ACTION_OBSERVED,
    ACTION_REJECTED,
    CONTROL_CHARS,
    EVENT_TYPES,
    GENERATION_FINISHED,
    LEDGER_DEDUP,
    MAX_ERROR_TEXT,
    MAX_EVENT_INT,
    MAX_TEXT,
    OUTCOMES,
    ROUND_FINISHED,
    ROUND_STARTED,
    TOOL_EARLY_STARTED,
    TOOL_FINISHED,
    TOOL_STARTED,
    TOOL_TIMEOUT,
)

TOOL_STATUSES: Final = ("ok", "error")
DEDUP_MATCHES: Final = ("slot", "fingerprint")

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
# RFC 3339 date-time: the offset is required (a time without one is ambiguous). ``T`` or a space
# separate date and time, as RFC 3339 §5.6 allows; any number of fraction digits.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The common shapes, checked first: the canonical UUID form (what ``str(uuid.UUID(…))`` gives)
#: and an RFC 3339 time in ASCII digits with at most microseconds, which ``fromisoformat`` (C)
#: reads as the full parser does. Anything else takes the full path, errors included.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PLAIN_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
#: The stored form of a time (``core.timewindow.format_ts``): kept as sent when it already is.
_STORED_TS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


class EventError(ValueError):
    """An event that breaks the protocol; the message is one plain sentence naming the field."""


class Event(NamedTuple):
    """One valid, normalized event (immutable; a named tuple because ingest makes one per event
    and a frozen dataclass costs ten times as much to build).

    ``data`` is the whole normalized event as stored and served (``ts`` as an ISO string with
    milliseconds, ``event_id`` in canonical lower case, ``attempt`` filled in, unknown fields
    kept). Treat it as read-only.
    """

    event_id: str
    ts: datetime
    type: str
    agent: str
    turn_id: str
    iteration: int
    attempt: int
    data: Mapping[str, Any]

    @property
    def round_key(self) -> tuple[str, str, int]:
        """A round is identified by (agent, turn_id, iteration)."""
        return (self.agent, self.turn_id, self.iteration)

    @property
    def action_index(self) -> int | None:
        """The streamed index the event is about; ``None`` for round-level events."""
        value = self.data.get("action_index")
        return value if isinstance(value, int) else None


def parse_event(raw: Any) -> Event:
    """Check one decoded JSON event against protocol v1 and normalize it.

    Raises :class:`EventError` naming the first field that breaks a rule.
    """
    if not isinstance(raw, Mapping):
        raise EventError(f"an event must be a JSON object, got {_show(raw)}")
    for key in raw:
        if not isinstance(key, str):
            raise EventError(f"event field names must be strings, got {_show(key)}")
    # Check ``type`` first: an unknown type is the most useful thing to report.
    event_type = raw.get("type")
    if "type" not in raw:
        raise EventError("type is required")
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        raise EventError(
            f"unknown event type {_show(event_type)}; known types are {', '.join(EVENT_TYPES)}"
        )
    data: dict[str, Any] = dict(raw)
    data["event_id"] = _event_id(_required(raw, "event_id"))
    sent_ts = _required(raw, "ts")
    ts = _stored_form(sent_ts)
    if ts is None:
        ts = _timestamp(sent_ts)
        sent_ts = format_ts(ts)
    data["ts"] = sent_ts
    data["agent"] = _identifier(_text(raw, "agent"), "agent")
    data["turn_id"] = _identifier(_text(raw, "turn_id"), "turn_id")
    data["iteration"] = _count(raw, "iteration")
    # ``attempt`` is filled in so that an omitted attempt and ``attempt: 0`` are the same content.
    data["attempt"] = _count(raw, "attempt") if "attempt" in raw else 0
    inferred = raw.get("inferred", False)
    if not isinstance(inferred, bool):
        raise EventError(f"inferred must be true or false, got {_show(inferred)}")
    for name, check in _FIELDS[event_type]:
        if inferred and name in NULL_WHEN_INFERRED and name in raw and raw[name] is None:
            data[name] = None  # a bridge could not know it (§4): null, never made up
            continue
        check(raw, data, name)
    return Event(
        data["event_id"],
        ts,
        event_type,
        data["agent"],
        data["turn_id"],
        data["iteration"],
        data["attempt"],
        data,
    )


def same_content(a: Event, b: Event) -> bool:
    """Whether two events carry the same normalized content (the test for a repeated event_id).

    Comparing normalized data makes ``ts`` in epoch ms and the equivalent RFC 3339 string equal.
    """
    return a.data == b.data


# --- single values --------------------------------------------------------------------------


def _show(value: Any) -> str:
    """A short description of a bad value for an error message (never the whole of a big one)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _required(raw: Mapping[str, Any], name: str) -> Any:
    if name not in raw:
        raise EventError(f"{name} is required")
    return raw[name]


def _is_int(value: Any) -> bool:
    # JSON true/false decode to bool, which Python counts as int: a count is never a bool.
    return isinstance(value, int) and not isinstance(value, bool)


def _event_id(value: Any) -> str:
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return value
    if isinstance(value, str) and len(value) <= 45:
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise EventError(f"event_id must be a UUID string, got {_show(value)}")


#: Integers beyond 2**53 lose precision as JSON numbers in most clients and overflow floats later.
_MAX_SAFE_NUMBER: Final = 2**53


def _stored_form(value: Any) -> datetime | None:
    """The time of a ``ts`` already in the stored form (UTC, milliseconds, ``Z``: what most
    runtimes send), or ``None``: any other form, and an invalid date, take :func:`_timestamp`."""
    if type(value) is not str or _STORED_TS.fullmatch(value) is None:
        return None
    try:
        return datetime.fromisoformat(value)  # "Z" reads as UTC; milliseconds already
    except ValueError:
        return None


def _timestamp(value: Any) -> datetime:
    """An aware UTC datetime truncated to milliseconds, the precision that is stored."""
    if isinstance(value, str):
        ts = _parse_plain(value) if _PLAIN_RFC3339.fullmatch(value) else None
        if ts is None:
            ts = _parse_rfc3339(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise EventError(f"ts must be finite epoch milliseconds, got {_show(value)}")
        try:
            ts = _EPOCH + timedelta(milliseconds=value)
        except OverflowError:
            raise EventError(f"ts is out of range, got {_show(value)}") from None
    else:
        raise EventError(f"ts must be an RFC 3339 string or epoch milliseconds, got {_show(value)}")
    # Truncate rather than round: rounding could carry into the next second (or past year 9999).
    return ts.replace(microsecond=ts.microsecond // 1000 * 1000)


def _finite(value: float) -> bool:
    """A number JSON and the database can hold: not NaN/infinite, and an int no larger than a
    double can carry (``math.isfinite`` itself raises OverflowError on a huge int)."""
    if isinstance(value, int):
        return abs(value) <= _MAX_SAFE_NUMBER
    return math.isfinite(value)


def _parse_plain(value: str) -> datetime | None:
    """A time of the common shape, in UTC; ``None`` when the full parser must decide (an
    invalid date, an offset past 23:59, a result out of range: it names the error)."""
    if value[-1] != "Z" and (int(value[-5:-3]) > 23 or int(value[-2:]) > 59):
        return None
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _parse_rfc3339(value: str) -> datetime:
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise EventError(
            f"ts must be an RFC 3339 date-time with a time zone offset, got {_show(value)}"
        )
    year, month, day, hour, minute, second = (int(part) for part in match.group(1, 2, 3, 4, 5, 6))
    micro = int((match.group(7) or "0")[:6].ljust(6, "0"))
    try:
        local = datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
        if match.group(8) is None:
            sign = 1 if match.group(9) == "+" else -1
            hours, minutes = int(match.group(10)), int(match.group(11))
            if hours > 23 or minutes > 59:
                raise ValueError("offset out of range")
            # The local time minus its offset is UTC.
            return local - sign * timedelta(hours=hours, minutes=minutes)
        return local
    except (ValueError, OverflowError):
        raise EventError(f"ts is not a valid date and time, got {_show(value)}") from None


def _check_text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EventError(f"{name} must be a non-empty string, got {_show(value)}")
    if len(value) > MAX_TEXT:
        raise EventError(f"{name} must be at most {MAX_TEXT} characters, got {len(value)}")
    if "\x00" in value:
        raise EventError(f"{name} must not contain a NUL character")
    return value


def _text(raw: Mapping[str, Any], name: str) -> str:
    return _check_text(_required(raw, name), name)


def _count(raw: Mapping[str, Any], name: str) -> int:
    value = _required(raw, name)
    if not _is_int(value) or value < 0:
        raise EventError(f"{name} must be an integer ≥ 0, got {_show(value)}")
    if value > MAX_EVENT_INT:
        raise EventError(f"{name} must be at most {MAX_EVENT_INT}, got {value}")
    return int(value)


# --- per-type field checks ------------------------------------------------------------------
# Each check reads ``raw`` and writes the normalized value into ``data``.

_Check = Callable[[Mapping[str, Any], dict[str, Any], str], None]


def _count_field(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    data[name] = _count(raw, name)


def _text_field(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    data[name] = _text(raw, name)


def _action_name(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    # Any string: an unsupported action ("think", even "") is exactly what the overseer rejects.
    value = _required(raw, name)
    if not isinstance(value, str):
        raise EventError(f"{name} must be a string, got {_show(value)}")
    if len(value) > MAX_TEXT:
        raise EventError(f"{name} must be at most {MAX_TEXT} characters, got {len(value)}")
    if "\x00" in value:
        raise EventError(f"{name} must not contain a NUL character")
    data[name] = value


def _tool_id(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    # Present but null for final answers and unsupported actions, which name no tool.
    value = _required(raw, name)
    data[name] = None if value is None else _identifier(_check_text(value, name), name)


def _identifier(value: str, name: str) -> str:
    """``agent``, ``turn_id`` and ``tool_id`` name things people open and filter by: a control
    character (a line break, a tab, DEL…) would make them unreadable and unusable in a URL, and
    ``.``/``..`` are not names but path steps a browser resolves (DESIGN §4 field rules)."""
    _no_control(value, name)
    if value in (".", ".."):
        raise EventError(f"{name} must not be {value!r} (a '.' or '..' path segment)")
    return value


def _no_control(value: str, name: str) -> str:
    found = CONTROL_CHARS.search(value)
    if found is not None:
        raise EventError(
            f"{name} must not contain control characters (U+{ord(found.group()):04X} at"
            f" position {found.start()})"
        )
    return value


def _number(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    value = _required(raw, name)
    if isinstance(value, int) and not isinstance(value, bool) and not _finite(value):
        raise EventError(f"{name} is out of range (at most {_MAX_SAFE_NUMBER}), got {_show(value)}")
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not _finite(value)
        or value < 0
    ):
        raise EventError(f"{name} must be a number ≥ 0, got {_show(value)}")
    data[name] = value


#: The longest call a duration may report: a day (a tool call beyond that is a clock error, and
#: folded into a percentile it would distort the tool's health for the whole window).
MAX_DURATION_MS: Final = 86_400_000


def _duration(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    _number(raw, data, name)
    if data[name] > MAX_DURATION_MS:
        raise EventError(
            f"{name} must be at most {MAX_DURATION_MS} ms (a day), got {_show(raw[name])}"
        )


def _hex64(value: Any, name: str) -> str:
    if not isinstance(value, str) or _HEX64.fullmatch(value) is None:
        raise EventError(f"{name} must be a sha256 hex string of 64 characters, got {_show(value)}")
    return value.lower()


def _fingerprint(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    data[name] = _hex64(_required(raw, name), name)


def _choice(choices: tuple[str, ...]) -> _Check:
    def check(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
        value = _required(raw, name)
        if not isinstance(value, str) or value not in choices:
            raise EventError(f"{name} must be one of {', '.join(choices)}, got {_show(value)}")
        data[name] = value

    return check


# Optional fields: absent and null mean the same, so both are stored as null (same content).
# ``params`` is the exception: a missing ``params`` and ``params: null`` differ for early
# eligibility (§2.4), so it is kept exactly as sent, present or not.


def _policy_hash(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    value = raw.get(name)
    data[name] = None if value is None else _hex64(value, name)


def _params(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    if name in raw:
        data[name] = raw[name]


def _strategy(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    value = raw.get(name)
    if value is None:
        data[name] = None
        return
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise EventError(f"{name} must be a list of strings, got {_show(value)}")
    data[name] = list(value)


def _extra(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    value = raw.get(name)
    if value is None:
        data[name] = None
        return
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise EventError(f"{name} must be an object or null, got {_show(value)}")
    data[name] = dict(value)


def _optional_text(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    value = raw.get(name)
    data[name] = None if value is None else _check_text(value, name)


def _optional_flag(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    """An optional true/false (``exec_code_complete``): null and absent are the same (not
    reported) and stored as absent, so events stored before the field existed keep their
    content."""
    value = raw.get(name)
    if value is None:
        data.pop(name, None)
        return
    if not isinstance(value, bool):
        raise EventError(f"{name} must be true, false or null, got {_show(value)}")
    data[name] = value


def _error_text(raw: Mapping[str, Any], data: dict[str, Any], name: str) -> None:
    """An optional error field (``error_code``, ``error_message``, ``runtime_error_code``): a
    non-empty string of at most :data:`MAX_ERROR_TEXT` characters without control characters
    (it is shown on the round page and the live card as text, like an id). Null and absent are
    the same and stored as absent, so events stored before the field existed keep their content."""
    value = raw.get(name)
    if value is None:
        data.pop(name, None)
        return
    if not isinstance(value, str) or not value.strip():
        raise EventError(f"{name} must be a non-empty string or null, got {_show(value)}")
    if len(value) > MAX_ERROR_TEXT:
        raise EventError(f"{name} must be at most {MAX_ERROR_TEXT} characters, got {len(value)}")
    data[name] = _no_control(value, name)


#: The optional error fields of ``tool.finished`` and ``round.finished`` (why a call or a round
#: failed, as the runtime said it).
_ERROR: Final[tuple[tuple[str, _Check], ...]] = (
    ("error_code", _error_text),
    ("error_message", _error_text),
)

_CALL: Final[tuple[tuple[str, _Check], ...]] = (
    ("action_index", _count_field),
    ("tool_id", _tool_id),
    ("tool_call_id", _text_field),
)

_FIELDS: Final[Mapping[str, tuple[tuple[str, _Check], ...]]] = {
    ROUND_STARTED: (("max_actions", _count_field), ("policy_hash", _policy_hash)),
    ACTION_OBSERVED: (
        ("action_index", _count_field),
        ("action", _action_name),
        ("tool_id", _tool_id),
        ("params", _params),
    ),
    ACTION_ACCEPTED: (
        ("action_index", _count_field),
        ("tool_id", _tool_id),
        ("strategy", _strategy),
    ),
    ACTION_REJECTED: (
        ("action_index", _count_field),
        ("tool_id", _tool_id),
        ("code", _text_field),
        ("extra", _extra),
    ),
    TOOL_EARLY_STARTED: (*_CALL, ("fingerprint", _fingerprint)),
    TOOL_STARTED: _CALL,
    TOOL_FINISHED: (
        *_CALL,
        ("status", _choice(TOOL_STATUSES)),
        ("duration_ms", _duration),
        *_ERROR,
    ),
    LEDGER_DEDUP: (
        *_CALL,
        ("original_action_index", _count_field),
        ("match", _choice(DEDUP_MATCHES)),
        ("fingerprint", _fingerprint),
    ),
    TOOL_TIMEOUT: (
        *_CALL,
        ("limit_ms", _number),
        ("elapsed_ms", _duration),
        ("async_alternative", _optional_text),
        # A bridge's inferred timeout: the error code the runtime published instead.
        ("runtime_error_code", _error_text),
    ),
    # Whether the decision's code channel streamed complete (the runtime's
    # ``_exec_streamer_is_complete``: code captured and a contract), known once generation ends.
    GENERATION_FINISHED: (("exec_code_complete", _optional_flag),),
    ROUND_FINISHED: (("outcome", _choice(OUTCOMES)), *_ERROR),
}

#: Fields an event marked ``"inferred": true`` may leave null (DESIGN §4): a bridge that reads a
#: runtime's own signals has no source for them.
NULL_WHEN_INFERRED: Final = frozenset({"fingerprint", "max_actions", "outcome", "action_index"})

#: The types that are about one streamed action (they carry ``action_index``).
ACTION_EVENT_TYPES: Final = tuple(
    name
    for name, fields in _FIELDS.items()
    if any(field_name == "action_index" for field_name, _ in fields)
)


def stored_event(data: Mapping[str, Any]) -> Event:
    """An event as stored (already parsed and normalized when it arrived): no check is repeated,
    so a rule added later never hides what was accepted before."""
    return Event(
        event_id=data["event_id"],
        ts=datetime.fromisoformat(data["ts"]),
        type=data["type"],
        agent=data["agent"],
        turn_id=data["turn_id"],
        iteration=data["iteration"],
        attempt=data["attempt"],
        data=data,
    )
