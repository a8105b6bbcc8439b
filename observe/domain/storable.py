"""Whether an incoming event can be stored: the one check every event passes before ingest keeps it.

``parse_event`` (``observe.domain.events``) reads the protocol fields; unknown fields and
``params`` are kept exactly as sent, so the limits of storage and of the pages that show an event
are checked here over everything (``core.json_limits``: nesting, 64-bit integers; no NUL, no NaN,
no lone surrogate), with the address rules of a round (its agent and turn_id become a URL) and the
clock (an event from the future would stay at the top of the history).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import orjson

from core.json_limits import json_problem
from core.text import dot_segment, show_path, unencodable_path
from core.vocabulary import MAX_DEPTH
from observe.domain.events import Event, EventError, parse_event


def check_storable(raw: Any, *, latest: datetime, skew_s: float) -> tuple[Event, str | None]:
    """Every rule an incoming event is held to, in one place: ``parse_event``'s protocol rules,
    then the limits of storage (any JSON database, SQLite or PostgreSQL) and of the pages that
    show the event. ``latest``: the latest ``ts`` accepted now (the server's clock plus
    ``skew_s`` seconds of allowed skew). Returns the event and its JSON text when the fast
    checks already encoded it (``None``: encode it when storing); raises ``EventError``."""
    try:
        event = parse_event(raw)
    except EventError:
        _encodable(raw)  # a lone surrogate is the error to report, wherever it is
        raise
    text = _plain_json(event.data)
    if text is None:
        _encodable(raw)
        problem = _unstorable(event.data)
        if problem is not None:
            raise EventError(problem)
    if "/" in event.agent:
        # A round's address (page and API) is <agent>/<turn_id>/<iteration> and only the turn_id
        # may contain "/": a round of such an agent could be stored but never opened.
        raise EventError("agent must not contain '/'")
    if dot_segment(event.turn_id):
        # The round's link would resolve elsewhere in the site ("../../policy").
        raise EventError("turn_id must not have a '.' or '..' path segment")
    if event.ts > latest:
        # A round from the future would stay at the top of the history and never be pruned.
        raise EventError(
            f"ts {event.data['ts']} is in the future (more than"
            f" {skew_s:.0f} s"
            " ahead of the server's clock)"
        )
    return event, text


def _plain_json(data: Any) -> str | None:
    """The event's JSON text when one cheap look shows it breaks no storage limit (no lone
    surrogate, NUL, NaN, deep nesting or huge number), else ``None``: then each value is
    checked one by one, which names the field. Each event is encoded once, for both.

    orjson encodes (a tenth of the standard encoder's time) and refuses lone surrogates, integers
    past 53 bits (the rare larger ones are checked one by one), non-text keys and deep nesting
    itself; it writes NaN and infinities as ``null``, so text holding a ``null`` is only taken
    when no such number is in the event."""
    try:
        encoded = orjson.dumps(data, option=orjson.OPT_STRICT_INTEGER)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
    if b"null" in encoded and _non_finite(data):
        return None
    text = encoded.decode("utf-8")
    if "\\u0000" in text or text.count("{") + text.count("[") >= MAX_DEPTH:
        return None
    return text


def _non_finite(data: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in ``data`` (walked with a stack)."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return True
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return False


def _encodable(raw: Any) -> None:
    where = unencodable_path(raw)
    if where is not None:
        # A lone UTF-16 surrogate ("\ud800") decodes from JSON but no page or database can
        # write it.
        raise EventError(f"{where} holds text that cannot be encoded as UTF-8 (a lone surrogate)")


def _unstorable(data: Any) -> str | None:
    """Why a decoded JSON value cannot be stored as-is, or ``None``.

    Unknown fields and ``params`` are kept exactly as sent, so the checks ``parse_event`` makes on
    the protocol fields are repeated here for everything: PostgreSQL refuses a NUL character in
    JSON text, JSON has no NaN or Infinity (SQLite's JSON check refuses them), integers must fit
    the 64 bits databases and JavaScript clients read, and nesting is bounded so that encoding
    the value again can never exhaust the stack.
    """
    found = json_problem(data, json_types=True)
    if found is None:
        return None
    name = show_path(found.path) or "the event"
    return {
        "nul": f"{name} must not contain a NUL character",
        "nul_key": f"a field name in {name} contains a NUL character",
        "integer": f"{name} is out of range: integers must fit in 64 bits",
        "not_finite": f"{name} must be a finite number",
        "too_deep": f"{name} nests deeper than {MAX_DEPTH} levels",
        "not_json": f"{name} is not a JSON value",
    }[found.kind]
