"""The one body reader of the API, and the refusals every router raises for the one mapping in
``config.api.install_error_handlers`` to turn into statuses (DESIGN §6).

Bodies are read by hand rather than through ninja body parameters so that each way a body can be
wrong keeps its own status and a plain sentence: 415 wrong type, 413 too large, 400 not JSON,
422 parseable but the wrong shape or text that cannot be stored (a lone UTF-16 surrogate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from django.http import HttpRequest
from ninja.errors import HttpError

from core.json_limits import NotJson, decode_json, nests_deeper
from core.numbers import parse_whole
from core.text import unencodable_path
from core.vocabulary import MAX_DEPTH

JSON_TYPES: Final = ("application/json",)
#: Seconds a client is told to wait when the store is busy (``Retry-After``).
RETRY_AFTER_S: Final = 1


class StoreBusy(Exception):
    """The database could not take the write now (locked, a lock timeout, unavailable). The
    transaction was rolled back, so nothing was stored: the client may send the same request
    again. ``django.db.OperationalError`` maps to the same 503."""

    def __init__(self, message: str = "", *, retry_after: int = RETRY_AFTER_S) -> None:
        super().__init__(message or "The store is busy")
        self.retry_after = retry_after


def read_body(request: HttpRequest, *, content_types: tuple[str, ...], limit: int) -> bytes:
    """The raw body, after the checks every endpoint shares: 415 wrong type, 413 too large
    (refused on the declared length before anything is read)."""
    content_type = (request.content_type or "").lower()
    if content_type not in content_types:
        raise HttpError(
            415,
            f"Send the body as {' or '.join(content_types)} (got {content_type[:60] or 'none'}).",
        )
    too_large = f"The body is over the limit of {limit} bytes."
    declared = request.META.get("CONTENT_LENGTH") or "0"
    size = parse_whole(declared)
    if size is not None and size > limit:
        raise HttpError(413, too_large)
    body = request.body
    if len(body) > limit:
        raise HttpError(413, too_large)
    return body


def parse_json(body: bytes) -> Any:
    """Decode a JSON body (``core.json_limits.decode_json``) or refuse it with 400."""
    try:
        return decode_json(body)
    except NotJson as exc:
        raise HttpError(400, f"The body is not valid JSON: {exc}.") from None


def read_json(request: HttpRequest, *, limit: int, check_text: bool = True) -> Any:
    """The decoded JSON body. With ``check_text`` (the default) a value that could be stored but
    never shown is a 422: a string that cannot be encoded as UTF-8 anywhere in it (``"\\ud800"``
    escapes decode to lone surrogates), or nesting past ``MAX_DEPTH`` (saving, exporting or
    showing it would exhaust the stack). The event ingest passes ``check_text=False`` because it
    rejects such an event by index instead of refusing the batch."""
    data = parse_json(read_body(request, content_types=JSON_TYPES, limit=limit))
    if check_text:
        if nests_deeper(data, MAX_DEPTH):
            raise HttpError(
                422, f"The body nests deeper than {MAX_DEPTH} levels; nothing was changed."
            )
        where = unencodable_path(data)
        if where is not None:
            raise HttpError(
                422,
                f"The body holds text that cannot be encoded as UTF-8 (a lone surrogate) at"
                f" {where}; nothing was changed.",
            )
    return data


def read_object(request: HttpRequest, *, limit: int) -> dict[str, Any]:
    data = read_json(request, limit=limit)
    if not isinstance(data, Mapping):
        raise HttpError(422, "The body must be a JSON object.")
    return dict(data)


def if_match_revision(request: HttpRequest) -> int | None:
    """``If-Match: "<revision>"`` → the revision the change is based on (None: no header)."""
    header = request.headers.get("If-Match")
    if header is None or header.strip() == "*":  # "*": any current draft, as with no header
        return None
    value = header.strip().removeprefix("W/").strip('"')
    revision = parse_whole(value)
    if revision is None:
        raise HttpError(400, 'If-Match must be a quoted draft revision, like "5".')
    return revision


def request_body(
    schema: dict[str, Any],
    *,
    content_types: tuple[str, ...] = JSON_TYPES,
    required: bool = True,
) -> dict[str, Any]:
    """The ``openapi_extra`` of an operation that reads its body itself (``read_json`` /
    ``read_body``, not a ninja schema): the body's schema under each content type it takes."""
    content = {content_type: {"schema": schema} for content_type in content_types}
    return {"requestBody": {"required": required, "content": content}}
