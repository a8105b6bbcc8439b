"""Versions API: list, diff, publish and roll back (session users), and the runtime's endpoint
``GET /agents/{agent}/config.yaml`` (runtime tokens with ``config:read``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from accounts.auth import RuntimeTokenAuth, session_auth
from core.numbers import parse_whole
from policy.domain.version_diff import tool_changes, unified_diff
from policy.selectors import draft_state
from policy.versions import (
    agent_config_file,
    policy_publish,
    policy_rollback,
    version_data,
    version_get,
    version_list,
    version_published,
    version_text,
)
from web.api_io import if_match_revision

router = Router(tags=["versions"], auth=session_auth)


class VersionOut(Schema):
    number: int
    sha256: str
    message: str
    author: str
    created_at: datetime
    in_force: bool
    rollback_of: int | None
    agent_hashes: dict[str, str]
    url: str


class VersionsOut(Schema):
    versions: list[VersionOut]
    in_force: int | None


class PublishIn(Schema):
    message: str = Field(max_length=2000)
    confirm_warnings: bool = False
    #: Publish although regression cases fail (the audit log records it).
    override_failing_cases: bool = False


class RollbackIn(Schema):
    message: str = Field(max_length=2000)
    confirm_errors: bool = False
    confirm_unpublished: bool = False


class DiffLineOut(Schema):
    kind: str
    text: str


class DiffOut(Schema):
    from_: str = Field(alias="from")
    to: str
    tools: list[str]
    lines: list[DiffLineOut]


class RefusalOut(Schema):
    error: str
    needs_confirmation: bool = False
    diagnostics: list[dict[str, Any]] = []


def _out(version: Any, in_force: int | None) -> dict[str, Any]:
    return {
        "number": version.number,
        "sha256": version.sha256,
        "message": version.message,
        "author": version.author_name,
        "created_at": version.created_at,
        "in_force": version.number == in_force,
        "rollback_of": version.rollback_of,
        "agent_hashes": version.agent_hashes,
        "url": reverse("policy:version", args=[version.number]),
    }


@router.get("/versions", response=VersionsOut)
def versions(request: HttpRequest) -> dict[str, Any]:
    """Every published version, newest first; ``in_force`` names the one runtimes fetch."""
    rows = version_list()
    in_force = rows[0].number if rows else None
    return {"versions": [_out(v, in_force) for v in rows], "in_force": in_force}


def side(name: str) -> tuple[str, Any]:
    """A diff side: ``draft``, ``published`` or a version number → (label, document)."""
    if name == "draft":
        state = draft_state()
        return f"draft (revision {state.revision})", state.data
    if name == "published":
        published = version_published()
        if published is None:
            raise HttpError(404, "Nothing is published yet.")
        return f"version {published.number}", version_data(published)
    number = parse_whole(name)
    if number is None:
        raise HttpError(
            422, f"A diff side is draft, published or a version number, not {name[:40]!r}."
        )
    found = version_get(number)
    if found is None:
        raise HttpError(404, f"There is no version {name}.")
    return f"version {found.number}", version_data(found)


@router.get("/versions/diff", response={200: DiffOut, 404: RefusalOut, 422: RefusalOut})
def diff(
    request: HttpRequest,
    from_: str = Query("published", alias="from"),  # type: ignore[type-arg]
    to: str = "draft",
) -> Any:
    """What changed from one side to the other (``draft``, ``published`` or a number): the
    unified diff of the exports and a per-tool summary in words."""
    old_label, old = side(from_)
    new_label, new = side(to)
    return {
        "from": old_label,
        "to": new_label,
        "tools": tool_changes(old, new),
        "lines": [
            {"kind": d.kind, "text": d.text}
            for d in unified_diff(old, new, old_label=old_label, new_label=new_label)
        ],
    }


@router.get("/versions/{number}", response={200: VersionOut, 404: RefusalOut})
def version(request: HttpRequest, number: int) -> Any:
    found = version_get(number)
    if found is None:
        raise HttpError(404, f"There is no version {number}.")
    published = version_published()
    return _out(found, published.number if published else None)


@router.get("/versions/{number}/export.yaml")
def version_export(request: HttpRequest, number: int) -> HttpResponse:
    """The version's whole-policy export (byte-identical to ``traitdeck fmt`` of it)."""
    found = version_get(number)
    if found is None:
        raise HttpError(404, f"There is no version {number}.")
    response = HttpResponse(version_text(found), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="traitdeck-policy-v{number}.yaml"'
    return response


@router.post(
    "/versions",
    response={201: VersionOut, 409: dict, 422: RefusalOut},
)
def publish(request: HttpRequest, body: PublishIn) -> Any:
    """Publish the draft (needs a message and no errors; warnings need ``confirm_warnings``).
    ``If-Match: "<revision>"`` refuses a draft that changed since (409)."""
    created = policy_publish(
        actor=request.user,
        message=body.message,
        base_revision=if_match_revision(request),
        confirm_warnings=body.confirm_warnings,
        override_failing_cases=body.override_failing_cases,
    )
    return Status(201, _out(created, created.number))


@router.post(
    "/versions/{number}/rollback",
    response={201: VersionOut, 404: RefusalOut, 422: RefusalOut},
)
def rollback(request: HttpRequest, number: int, body: RollbackIn) -> Any:
    """Publish a copy of an older version and set the draft to it (confirmations as the page)."""
    try:
        created = policy_rollback(
            actor=request.user,
            number=number,
            message=body.message,
            confirm_errors=body.confirm_errors,
            confirm_unpublished=body.confirm_unpublished,
        )
    except LookupError as exc:  # no such version
        raise HttpError(404, str(exc)) from None
    return Status(201, _out(created, created.number))


runtime_router = Router(tags=["runtime"], auth=RuntimeTokenAuth("config:read"))


@runtime_router.get("/agents/{agent}/config.yaml")
def agent_config(request: HttpRequest, agent: str) -> HttpResponse:
    """The **published** policy of one agent as the runtime loads it (DESIGN §6): the export
    header over ``surfaces.as_consumer`` holding only that agent. ``ETag`` is the header's hash;
    a matching ``If-None-Match`` answers 304. 404: nothing published, or no such agent."""
    found = agent_config_file(agent)
    if found is None:
        if version_published() is None:
            raise HttpError(404, "Nothing is published yet: publish the draft first.")
        raise HttpError(404, f"The published policy has no agent {agent!r}.")
    wanted = [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]
    if found.etag in wanted or "*" in wanted:
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(found.text, content_type="application/yaml; charset=utf-8")
    response["ETag"] = found.etag
    response["Cache-Control"] = "no-cache"
    response["X-Policy-Version"] = str(found.version)
    return response
