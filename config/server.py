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
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Final

from daphne import server as daphne_server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest

DEFAULT_MAX_BODY_BYTES: Final = 2 * 1024 * 1024
ENV_NAME: Final = "TRAITDECK_MAX_BODY_BYTES"


def max_body_bytes() -> int:
    """The largest request body accepted (``TRAITDECK_MAX_BODY_BYTES``; a value that is not a
    positive whole number of bytes falls back to the default)."""
    raw = os.environ.get(ENV_NAME, "").strip()
    if raw.isascii() and raw.isdigit() and 0 < len(raw) <= 15 and int(raw) > 0:
        return int(raw)
    return DEFAULT_MAX_BODY_BYTES


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


class LimitedHTTPFactory(HTTPFactory):  # type: ignore[misc]
    """daphne's factory, building :class:`LimitedWebRequest` instead of its ``WebRequest``."""

    def buildProtocol(self, addr: Any) -> Any:  # noqa: N802 (Twisted's name)
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedWebRequest
        return protocol


def main(argv: list[str] | None = None) -> None:
    LimitedWebRequest.limit = max_body_bytes()
    # daphne's Server builds its HTTPFactory by this module-level name when it runs.
    daphne_server.HTTPFactory = LimitedHTTPFactory
    CommandLineInterface().run(argv if argv is not None else __import__("sys").argv[1:])


if __name__ == "__main__":
    main()
