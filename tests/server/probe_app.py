"""A tiny ASGI application for the body-limit tests: it appends how many body bytes each request
handed it to the file named by ``PROBE_LOG``, then answers 200."""

from __future__ import annotations

import os
from typing import Any


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        return
    received = 0
    while True:
        message = await receive()
        received += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    with open(os.environ["PROBE_LOG"], "a") as log:  # noqa: ASYNC230 (a test probe: tiny write)
        log.write(f"{scope['method']} {scope['path']} {received}\n")
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(received).encode()})
