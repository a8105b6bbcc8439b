"""daphne with a request body limit enforced as the bytes arrive: ``python -m config.server``.

Twisted reads a request's whole body (into memory, or a temporary file past 100 KB) before
daphne hands the request to the application, so no ASGI or Django middleware can refuse a large
body before it has been received: a 100 MB anonymous POST costs 100 MB of reading (and four at
once took a worker from 142 MB to 540 MB RSS). Here the Twisted request itself refuses: on its
headers when ``Content-Length`` is over the limit, else as soon as the chunks received pass it
(``Transfer-Encoding: chunked``), answering ``413`` and closing the connection; the application
never runs, and nothing past the limit is kept.

Usage is daphne's own (every option passes through)::

    python -m config.server -b 127.0.0.1 -p 8001 --proxy-headers config.asgi:application

The limit is :func:`max_body_bytes` (``TRAITDECK_MAX_BODY_BYTES``, default 2 MiB), which is
also Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``: one number for both layers. No Django here.

Read timeouts (slow-loris: 40 connections trickling bytes stayed open 75 s, each byte resetting
Twisted's 60 s idle timer; daphne has no option for either): a request's headers must be complete
within ``TRAITDECK_HEADER_TIMEOUT_S`` (default 10) of its first byte, or of the connection when
nothing comes, else ``408`` and the connection closes (:class:`DeadlineHTTPChannel`); and no gap
while reading a request (or waiting for the next one on a kept-alive connection) may be longer
than ``TRAITDECK_BODY_GAP_TIMEOUT_S`` (default 30: Twisted's idle timeout, which it suspends while
the application answers). A websocket is past both once upgraded (its pings are daphne's).

Reason phrases: daphne hands Twisted only a response's status code, and Twisted's table has no
422, 429 and a few more, so those went out as "422 Unknown Status"; :func:`reason_phrase` fills
them from Python's :class:`http.HTTPStatus`.
"""

from __future__ import annotations

import io
import json
import os
from http import HTTPStatus
from typing import Any, Final

from daphne import server as daphne_server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web import http

DEFAULT_MAX_BODY_BYTES: Final = 2 * 1024 * 1024
ENV_NAME: Final = "TRAITDECK_MAX_BODY_BYTES"
DEFAULT_HEADER_TIMEOUT_S: Final = 10.0
HEADER_TIMEOUT_ENV: Final = "TRAITDECK_HEADER_TIMEOUT_S"
DEFAULT_BODY_GAP_TIMEOUT_S: Final = 30.0
BODY_GAP_TIMEOUT_ENV: Final = "TRAITDECK_BODY_GAP_TIMEOUT_S"


def max_body_bytes() -> int:
    """The largest request body accepted (``TRAITDECK_MAX_BODY_BYTES``; a value that is not a
    positive whole number of bytes falls back to the default)."""
    raw = os.environ.get(ENV_NAME, "").strip()
    if raw.isascii() and raw.isdigit() and 0 < len(raw) <= 15 and int(raw) > 0:
        return int(raw)
    return DEFAULT_MAX_BODY_BYTES


def seconds_setting(name: str, default: float) -> float:
    """A positive number of seconds from the environment variable ``name`` (at most a day);
    anything else falls back to ``default``."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw.isascii() and 0 < len(raw) <= 12 else default
    except ValueError:
        return default
    return value if 0 < value <= 86_400 else default


def reason_phrase(code: int) -> bytes | None:
    """The reason phrase of a status code from Python's :class:`http.HTTPStatus` (``None`` for
    an unregistered code: Twisted then writes its "Unknown Status")."""
    try:
        return HTTPStatus(code).phrase.encode("ascii")
    except ValueError:
        return None


def refusal_bytes(limit: int) -> bytes:
    """The whole 413 response: JSON with a reason, like every API refusal; the connection
    closes (the rest of the body is never read)."""
    body = json.dumps(
        {"error": f"The request body is over the limit of {limit} bytes; nothing was read."}
    ).encode()
    head = (
        "HTTP/1.1 413 Content Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


class LimitedWebRequest(WebRequest):  # type: ignore[misc]
    """daphne's request, refusing a body over :func:`max_body_bytes` while it arrives."""

    limit: int = DEFAULT_MAX_BODY_BYTES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.received = 0
        self.refused = False
        super().__init__(*args, **kwargs)

    def setResponseCode(self, code: int, message: bytes | None = None) -> None:  # noqa: N802
        """daphne passes only the status; Twisted's table of reason phrases lacks 422, 429 and
        others (its line read "422 Unknown Status", and Swagger UI showed "Error: Unknown
        Status"). Python's own table names every registered code."""
        if message is None and code not in http.RESPONSES:
            message = reason_phrase(code)
        super().setResponseCode(code, message)

    def gotLength(self, length: int | None) -> None:  # noqa: N802 (Twisted's name)
        if length is not None and length > self.limit:
            self.content = io.BytesIO()  # Twisted closes it when the connection goes
            self._refuse()
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:  # noqa: N802 (Twisted's name)
        if self.refused:
            return
        self.received += len(data)
        if self.received > self.limit:
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:  # noqa: N802
        if self.refused:
            return  # the body was refused: the application must not run
        super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self.refused = True
        self.channel.transport.write(refusal_bytes(self.limit))
        self.channel.transport.loseConnection()


_TIMED_OUT_BODY: Final = b"The request headers did not arrive in time.\n"
TIMED_OUT: Final = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_TIMED_OUT_BODY), _TIMED_OUT_BODY)
)


class DeadlineHTTPChannel(http.HTTPChannel):
    """Twisted's HTTP channel with a deadline for a request's headers: from the connection, and
    again from the first byte of each next request, all of them within ``header_timeout_s``."""

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    _header_call: Any = None

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def connectionMade(self) -> None:  # noqa: N802 (Twisted's name)
        super().connectionMade()  # type: ignore[no-untyped-call]
        self._start_header_deadline()

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 (Twisted's name)
        if self.line_mode and not self._handlingRequest:
            self._start_header_deadline()  # the next request on a kept-alive connection
        super().dataReceived(data)  # type: ignore[no-untyped-call]

    def allHeadersReceived(self) -> None:  # noqa: N802 (Twisted's name)
        self._stop_header_deadline()
        super().allHeadersReceived()  # type: ignore[no-untyped-call]

    def connectionLost(self, reason: Failure = connectionDone) -> None:  # noqa: N802
        self._stop_header_deadline()
        super().connectionLost(reason)  # type: ignore[no-untyped-call]

    def _start_header_deadline(self) -> None:
        if self._header_call is None:
            call_later: Any = self.callLater
            self._header_call = call_later(self.header_timeout_s, self._headers_too_slow)

    def _stop_header_deadline(self) -> None:
        call, self._header_call = self._header_call, None
        if call is not None and call.active():
            call.cancel()

    def _headers_too_slow(self) -> None:
        self._header_call = None
        transport: Any = self.transport
        transport.write(TIMED_OUT)
        transport.loseConnection()


class LimitedHTTPFactory(HTTPFactory):  # type: ignore[misc]
    """daphne's factory, building :class:`DeadlineHTTPChannel` channels (Twisted's idle timeout
    set to the body gap) with :class:`LimitedWebRequest` instead of its ``WebRequest``."""

    body_gap_timeout_s: float = DEFAULT_BODY_GAP_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeOut = self.body_gap_timeout_s

    def protocol(self) -> Any:  # Twisted's ServerFactory calls it to build one
        return http._GenericHTTPChannelProtocol(DeadlineHTTPChannel())

    def buildProtocol(self, addr: Any) -> Any:  # noqa: N802 (Twisted's name)
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedWebRequest
        return protocol


def main(argv: list[str] | None = None) -> None:
    LimitedWebRequest.limit = max_body_bytes()
    DeadlineHTTPChannel.header_timeout_s = seconds_setting(
        HEADER_TIMEOUT_ENV, DEFAULT_HEADER_TIMEOUT_S
    )
    LimitedHTTPFactory.body_gap_timeout_s = seconds_setting(
        BODY_GAP_TIMEOUT_ENV, DEFAULT_BODY_GAP_TIMEOUT_S
    )
    # daphne's Server builds its HTTPFactory by this module-level name when it runs.
    daphne_server.HTTPFactory = LimitedHTTPFactory
    CommandLineInterface().run(argv if argv is not None else __import__("sys").argv[1:])


if __name__ == "__main__":
    main()
