"""KDCube API: the target's state (config drift, pushes), push a version, import its props."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from accounts.auth import RuntimeTokenAuth, session_auth
from kdcube.client import KDCubeError
from kdcube.services import (
    KDCubeOff,
    config_drift,
    config_drift_lines,
    config_drift_sentence,
    inert_diagnostics,
    kdcube_observe_coalesced,
    kdcube_pull,
    kdcube_push,
    kdcube_take_in,
    kdcube_target,
    last_read,
    push_status,
)
from policy.importing import import_preview
from policy.services import StaleRevision, draft_replace
from policy.versions import version_published
from web.api_io import if_match_revision

router = Router(tags=["kdcube"], auth=session_auth)


class KDCubeErrorOut(Schema):
    error: str


class KDCubePushIn(Schema):
    version: int | None = Field(default=None, ge=1, le=2**31 - 1)
    #: Write although the subtree changed since Traitdeck read it (or was never read).
    overwrite: bool = False


class KDCubePushOut(Schema):
    version: int
    target: str
    status: str
    answer: str
    hash: str
    at: datetime


class KDCubeChangeOut(Schema):
    #: Where, as people read it ("`main` → connection `web` → `web_search`: strategy").
    path: str
    #: The values where the allow-list shows them (strategy, execution fields, allowed, names);
    #: ``null`` for "a value changed", an added or a removed entry.
    before: str | None
    after: str | None
    text: str


class KDCubeDriftOut(Schema):
    version: int | None
    differs: list[str]
    #: How KDCube's owned subtree differs from what Traitdeck last pushed or took in.
    changes: list[KDCubeChangeOut]
    #: At most 20 lines of ``changes``, then "and N more".
    lines: list[str]
    #: Named in KDCube's bundles.props.update message and relayed by the bridge: reported by
    #: KDCube, never a verified user.
    updated_by: str
    at: datetime
    sentence: str


class KDCubeStatusOut(Schema):
    target: str
    in_force: int | None
    pushed: KDCubePushOut | None
    last_read_at: datetime | None
    config_drift: KDCubeDriftOut | None
    #: Keys of the last read props the runtime never reads (``key-inert``).
    inert: list[str]


class KDCubePullOut(Schema):
    diff: str
    secrets_not_imported: list[str]
    applied: bool
    revision: int
    diagnostics: list[dict[str, Any]]


def _target_label() -> str:
    try:
        return kdcube_target().label
    except KDCubeOff as exc:
        raise HttpError(404, str(exc)) from None


def _push_out(row: Any) -> dict[str, Any]:
    return {
        "version": row.version,
        "target": row.target,
        "status": row.status,
        "answer": row.answer,
        "hash": row.subtree_hash,
        "at": row.at,
    }


@router.get("/kdcube", response={200: KDCubeStatusOut, 404: KDCubeErrorOut})
def kdcube_status(request: HttpRequest) -> Any:
    """The configured target, the push of the version in force and any config drift (the
    bundle's props changed outside Traitdeck). 404 when no target is configured."""
    label = _target_label()
    in_force = version_published()
    pushed = push_status([in_force.number]).get(in_force.number) if in_force else None
    drift = config_drift()
    read = last_read()
    return {
        "target": label,
        "in_force": in_force.number if in_force else None,
        "pushed": _push_out(pushed) if pushed else None,
        "last_read_at": read.at if read else None,
        "config_drift": {
            "version": drift.version,
            "differs": drift.differs,
            "changes": drift.changes,
            "lines": config_drift_lines(drift),
            "updated_by": drift.updated_by,
            "at": drift.at,
            "sentence": config_drift_sentence(drift) or "",
        }
        if drift
        else None,
        "inert": read.inert if read else [],
    }


@router.post("/kdcube/push", response={200: KDCubePushOut, 404: KDCubeErrorOut})
def kdcube_push_api(request: HttpRequest, payload: KDCubePushIn) -> Any:
    """Push a version (default: the one in force). 200 with ``status`` ``pushed``, ``failed``
    (KDCube's answer) or ``refused`` (nothing written, ``answer`` says why)."""
    _target_label()
    try:
        row = kdcube_push(actor=request.user, number=payload.version, overwrite=payload.overwrite)
    except LookupError as exc:
        raise HttpError(404, str(exc)) from None
    return _push_out(row)


@router.post(
    "/kdcube/pull",
    response={
        200: KDCubePullOut,
        404: KDCubeErrorOut,
        409: KDCubeErrorOut,
        422: KDCubeErrorOut,
        502: KDCubeErrorOut,
    },
)
def kdcube_pull_api(request: HttpRequest, dry_run: bool = True) -> Any:
    """Import from KDCube: preview (default) the owned subtree its runtimes load against the
    draft, storing nothing; with ``dry_run=false`` replace the draft with it, and its read
    becomes the push guard's baseline. Secrets are never imported."""
    _target_label()
    base_revision = if_match_revision(request)
    try:
        pulled = kdcube_pull()
    except KDCubeError as exc:
        return Status(502, {"error": str(exc)})
    preview = import_preview(pulled.text)
    if preview.refused:
        return Status(422, {"error": "KDCube's props cannot be imported; nothing changed."})
    if base_revision is not None and base_revision != preview.draft.revision:
        raise StaleRevision(base_revision, preview.draft.revision)
    result = {
        "diff": preview.diff,
        "secrets_not_imported": pulled.secrets,
        "diagnostics": [
            *preview.analysis.report().get("diagnostics", []),
            *(d.to_dict() for d in inert_diagnostics(pulled.inert)),
        ],
    }
    if dry_run:
        return {**result, "applied": False, "revision": preview.draft.revision}
    state = draft_replace(data=preview.data, base_revision=base_revision, user=request.user)
    kdcube_take_in(pulled.read)
    return {**result, "applied": True, "revision": state.revision}


class KDCubeChangedIn(Schema):
    source: str = Field(default="listener", pattern="^(listener|poll)$")
    #: Who KDCube's message named: kept as reported (letters, digits, ``_.@+-``, at most 64).
    updated_by: str = Field(default="", max_length=1000)


class KDCubeChangedOut(Schema):
    outside_change: bool
    differs: list[str]
    version: int | None
    #: Answered by a read made for another call (one KDCube read per bundle per few seconds).
    coalesced: bool


@router.post(
    "/kdcube/props-changed",
    auth=RuntimeTokenAuth("events:write"),
    response={200: KDCubeChangedOut, 404: KDCubeErrorOut, 502: KDCubeErrorOut},
)
def kdcube_props_changed(request: HttpRequest, payload: KDCubeChangedIn) -> Any:
    """The bridge saw ``bundles.props.update`` (or its fallback poll is due): read the props
    and compare them with the guard's baseline and the version in force (token scope
    ``events:write``). Calls are coalesced: at most one KDCube read per bundle per few seconds.
    The writer's name is recorded as reported, never as a verified user."""
    _target_label()
    try:
        seen = kdcube_observe_coalesced(source=payload.source, updated_by=payload.updated_by)
    except KDCubeError as exc:
        return Status(502, {"error": str(exc)})
    return {
        "outside_change": seen.outside_change,
        "differs": seen.read.differs if seen.read else [],
        "version": seen.read.version if seen.read else None,
        "coalesced": seen.coalesced,
    }
