"""``POST /api/v1/bridge/status``: a running KDCube bridge's heartbeat (token scope
``events:write``, the scope it posts events with)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.errors import HttpError

from accounts.auth import RuntimeTokenAuth
from kdcube.bridge.services import BadReport, bridge_report
from web.api_io import read_json, request_body

router = Router(tags=["bridge"])
MAX_BYTES = 64 * 1024


class StatusOut(Schema):
    agents: list[str]


STATUS_BODY = request_body(
    {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 100},
            "last_envelope_ms": {"type": ["integer", "null"], "minimum": 0},
            "counts": {"type": ["object", "null"]},
        },
    }
)


@router.post(
    "/bridge/status",
    auth=RuntimeTokenAuth("events:write"),
    response={200: StatusOut},
    openapi_extra=STATUS_BODY,
)
def bridge_status(request: HttpRequest) -> dict[str, Any]:
    """Store what the bridge saw (envelopes, mapped, inferred, skipped by reason, the time of
    its last envelope); the answer lists the policy's agents for its agent mapping."""
    body = read_json(request, limit=MAX_BYTES)
    token = request.auth  # type: ignore[attr-defined]
    try:
        return bridge_report(body, token_name=str(getattr(token, "name", "")))
    except BadReport as exc:
        raise HttpError(422, str(exc)) from exc
