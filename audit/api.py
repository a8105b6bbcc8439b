"""Audit API: the audit log as JSON, with the page's filters (user, action, since, until)."""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpRequest
from django.utils import timezone
from ninja import P, QueryEx, Router, Schema
from ninja.errors import HttpError

from audit.selectors import audit_entries, entry_json, parse_filter

#: Browser sessions only; the authentication is given where ``config.api`` mounts this router:
#: audit sits below accounts (accounts records its token changes here), so it cannot import it.
router = Router(tags=["audit"])

DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500


class AuditEntryOut(Schema):
    id: int
    at: str
    actor: str
    action: str
    target: str
    message: str
    before: Any = None
    after: Any = None
    ref: dict[str, Any]


class AuditPageOut(Schema):
    count: int
    page: int
    pages: int
    entries: list[AuditEntryOut]


class ErrorOut(Schema):
    error: str


_TIME = "a span back from now (15m, 24h, 7d) or ISO 8601"


@router.get("/audit", response={200: AuditPageOut, 422: ErrorOut})
def audit_list(
    request: HttpRequest,
    user: QueryEx[
        str | None, P(description="the actor's name, exactly (`cli` for commands)")
    ] = None,
    action: QueryEx[
        str | None,
        P(description="any part of the action, any case (`publish`, `token.`, `tool.edit`)"),
    ] = None,
    since: QueryEx[str | None, P(description=f"{_TIME}; entries at or after it")] = None,
    until: QueryEx[str | None, P(description=f"{_TIME}; entries before it")] = None,
    page: QueryEx[int, P(description="1-based")] = 1,
    limit: QueryEx[int, P(description=f"1 to {MAX_LIMIT}")] = DEFAULT_LIMIT,
) -> Any:
    """Audit entries, newest first: who changed what, when, and the part that changed before
    and after (`null`: it did not exist)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise HttpError(422, f"limit must be between 1 and {MAX_LIMIT} (got {limit}).")
    if not 1 <= page <= 1_000_000:
        raise HttpError(422, f"page must be between 1 and 1000000 (got {page}).")
    params = {"user": user, "action": action, "since": since, "until": until}
    parsed = parse_filter(params, now=timezone.now())
    if parsed.errors:
        raise HttpError(422, " ".join(parsed.errors))
    entries = audit_entries(parsed.audit_filter)
    count = entries.count()
    start = (page - 1) * limit
    return {
        "count": count,
        "page": page,
        "pages": max((count + limit - 1) // limit, 1),
        "entries": [entry_json(entry) for entry in entries[start : start + limit]],
    }
