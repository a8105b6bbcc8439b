"""Policy API: validate, import, export the draft; an agent's effective traits, catalog, dry-run.

Handlers stay thin: read the body, call one selector or service, shape the response.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema, Status
from ninja.errors import HttpError

from accounts.auth import session_auth
from engine.catalog.catalog import catalog_preview, render_scope
from engine.catalog.multi_action import CATALOG_DETAILS, agent_presentation
from engine.document.diagnostics import summarize
from engine.document.jsonable import jsonable
from engine.round.dryrun import dry_run, parse_round_spec
from engine.round.react_version import REACT_VERSIONS
from engine.tools.resolution import AgentResolution, effective_json
from policy.domain.descriptor_write import ExportRefused
from policy.domain.descriptors import DescriptorError
from policy.domain.edits import as_sentence
from policy.domain.validation.tools_unknown import render_unseen, unseen_tools
from policy.domain.yaml_io import WEB_MAX_BYTES
from policy.exporting import (
    VersionMissing,
    descriptor_export,
    descriptor_response,
    draft_export_response,
)
from policy.importing import import_preview
from policy.selectors import (
    DraftState,
    agent_prediction,
    agent_resolution,
    draft_state,
    dry_run_mode,
    dry_run_version,
    role_param,
    text_analysis,
)
from policy.services import StaleRevision, draft_replace
from web.api_io import if_match_revision, read_body, read_json, request_body

router = Router(tags=["policy"], auth=session_auth)


class DiagnosticOut(Schema):
    severity: str
    code: str
    path: str
    line: int | None
    column: int | None
    message: str
    hint: str


class SummaryOut(Schema):
    errors: int
    warnings: int
    info: int


class ReportOut(Schema):
    """What `traitdeck validate --format json` prints."""

    diagnostics: list[DiagnosticOut]
    summary: SummaryOut


class RefusalOut(ReportOut):
    """Text that cannot become a policy: why, and its diagnostics. Nothing was changed. For a
    KDCube bundles descriptor: the ids of its bundles that carry a policy."""

    error: str
    policy_bundles: list[str] = []


class BundleMissingOut(Schema):
    """A bundles descriptor without the bundle asked for (``?bundle=``)."""

    error: str
    policy_bundles: list[str]


class ImportOut(ReportOut):
    diff: str
    applied: bool
    revision: int
    #: The bundle imported when the text was a KDCube bundles descriptor, and the ids of its
    #: bundles that carry a policy (a client may offer them to choose another).
    bundle: str | None = None
    policy_bundles: list[str] = []


def descriptor_refusal(exc: DescriptorError) -> Status[Any]:
    """A descriptor whose bundle cannot be read as asked: 404 for a bundle it does not have
    (with the ids it has), 422 when it has none, several and none was named, or is malformed."""
    body: dict[str, Any] = {
        "error": f"{as_sentence(str(exc))} Nothing was changed.",
        "policy_bundles": list(exc.policy_ids),
    }
    if exc.kind == "unknown":
        return Status(404, body)
    return Status(422, {**body, "diagnostics": [], "summary": summarize([])})


class ConflictOut(Schema):
    error: str
    revision: int


YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
YAML_BODY = request_body({"type": "string"}, content_types=YAML_TYPES)
JSON_BODY = request_body({"type": "object"})


@router.post(
    "/policy/validate",
    response={200: ReportOut, 404: BundleMissingOut, 413: RefusalOut, 422: RefusalOut},
    openapi_extra=YAML_BODY,
)
def validate(request: HttpRequest, bundle: str | None = None) -> Any:
    """Diagnostics of a YAML text (any text: a syntax error is a `yaml-syntax` diagnostic).
    A KDCube bundles descriptor is read for `bundle` (default: its only bundle with a policy)."""
    body = read_body(request, content_types=YAML_TYPES, limit=WEB_MAX_BYTES)
    try:
        analysis = text_analysis(body, max_bytes=WEB_MAX_BYTES, bundle=bundle)
    except DescriptorError as exc:
        return descriptor_refusal(exc)
    too_large = [d for d in analysis.diagnostics if d.code == "yaml-too-large"]
    if too_large:
        error = f"The text is too large: {too_large[0].message}."
        return Status(413, {"error": error, **analysis.report()})
    return analysis.report()


@router.post(
    "/policy/import",
    response={
        200: ImportOut,
        404: BundleMissingOut,
        409: ConflictOut,
        413: RefusalOut,
        422: RefusalOut,
    },
    openapi_extra=YAML_BODY,
)
def import_policy(request: HttpRequest, dry_run: bool = True, bundle: str | None = None) -> Any:
    """Preview (default) or apply a YAML import: diagnostics, a diff against the draft, and
    with `dry_run=false` the draft is replaced. Refused text changes nothing (422, or 413 when
    too large). A KDCube bundles descriptor imports the props of `bundle` (default: its only
    bundle with a policy; 422 when it has several, 404 naming them for an unknown one)."""
    body = read_body(request, content_types=YAML_TYPES, limit=WEB_MAX_BYTES)
    base_revision = if_match_revision(request)
    try:
        preview = import_preview(body, max_bytes=WEB_MAX_BYTES, bundle=bundle)
    except DescriptorError as exc:
        return descriptor_refusal(exc)
    if preview.refused:
        return Status(
            413 if preview.too_large else 422,
            {
                "error": "The text cannot be imported; nothing was changed.",
                **preview.analysis.report(),
            },
        )
    # A precondition holds for previews too: a diff against another draft than the client
    # believes it has would mislead.
    if base_revision is not None and base_revision != preview.draft.revision:
        raise StaleRevision(base_revision, preview.draft.revision)
    result = {
        **preview.analysis.report(),
        "diff": preview.diff,
        "bundle": preview.bundle,
        "policy_bundles": list(preview.analysis.policy_bundles),
    }
    if dry_run:
        return {**result, "applied": False, "revision": preview.draft.revision}
    new_state = draft_replace(data=preview.data, base_revision=base_revision, user=request.user)
    return {**result, "applied": True, "revision": new_state.revision}


@router.get("/policy/export.yaml")
def export_yaml(request: HttpRequest) -> HttpResponse:
    """The draft as the YAML the runtime loads, byte-identical to `traitdeck fmt`."""
    return draft_export_response()


@router.post(
    "/policy/export-into",
    response={200: None, 404: BundleMissingOut, 413: RefusalOut, 422: RefusalOut},
    openapi_extra=YAML_BODY,
)
def export_into(request: HttpRequest, bundle: str | None = None, version: int | None = None) -> Any:
    """The KDCube bundles descriptor sent as the body, with the draft (or `version`) written
    into bundle `bundle` (default: its only bundle with a policy, else its only bundle): only
    the policy's lines change, comments and formatting stay (`traitdeck export --into`). 422
    when the draft changed keys outside the policy or the body is not a descriptor; 404 for an
    unknown bundle or version."""
    body = read_body(request, content_types=YAML_TYPES, limit=WEB_MAX_BYTES)
    try:
        written = descriptor_export(body, bundle=bundle, version=version)
    except DescriptorError as exc:
        return descriptor_refusal(exc)
    except VersionMissing:
        return Status(404, {"error": f"There is no version {version}.", "policy_bundles": []})
    except ExportRefused as exc:
        return Status(
            422,
            {
                "error": f"{as_sentence(str(exc))} Nothing was written.",
                "diagnostics": [d.to_dict() for d in exc.diagnostics],
                "summary": summarize(exc.diagnostics),
            },
        )
    return descriptor_response(written)


def agent_or_404(state: DraftState, agent: str) -> AgentResolution:
    """The agent's resolution in ``state``; ``AgentNotFound`` (404, mapped in ``config.api``)
    when the draft has no such agent."""
    return agent_resolution(state, agent)


@router.get("/agents/{agent}/effective")
def effective(request: HttpRequest, agent: str, role: str | None = None) -> Any:
    """Effective traits of each tool and the layer each key came from (`traitdeck effective`).
    `role` (parent, child, none) picks the built-ins, as the CLI's `--role`."""
    # jsonable: a YAML trait key may be a date or a number; JSON keys are text.
    state = draft_state()
    run = agent_prediction(state, agent, role=role_param(role))
    return jsonable(
        {
            **effective_json(run.resolution),
            "resolved_agent": run.resolved_agent,
            "unseen_tools": [entry.as_json() for entry in unseen_tools(run.resolution)],
            "diagnostics": [d.to_dict() for d in run.diagnostics],
            **agent_presentation(
                state.data, agent, mode_setting=settings.TRAITDECK_MULTI_ACTION_MODE
            ),
        }
    )


@router.get("/agents/{agent}/catalog")
def catalog(
    request: HttpRequest,
    agent: str,
    format: str = "text",
    role: str | None = None,
    detail: str | None = None,
) -> Any:
    """The catalog text the model reads (`text/plain`), or in JSON `{"tools": [{"id", "scope"}],
    "detail", "text", "default_detail", "default_detail_source", "include_tool_catalog",
    "include_tool_catalog_source"}`; `detail` (`full` or `compact`) picks the runtime's form,
    else the one the agent reads by default; `role` as for the effective traits."""
    if format not in {"text", "json"}:
        raise HttpError(422, "format must be text or json.")
    if detail is not None and detail not in CATALOG_DETAILS:
        raise HttpError(422, "detail must be full or compact.")
    # The runtime's list: a tool two connections both load is listed twice, as the model reads it.
    state = draft_state()
    run = agent_prediction(state, agent, role=role_param(role))
    tools = run.resolution.listing
    preview = catalog_preview(state.data, agent, tools, detail=detail)
    if format == "json":
        return jsonable(
            {
                "resolved_agent": run.resolved_agent,
                **preview.as_json(),
                "unseen_tools": [
                    {**entry.as_json(), "scope": entry.scope}
                    for entry in unseen_tools(run.resolution)
                ],
                "tools": [
                    {
                        "id": t.tool_id,
                        "scope": render_scope(
                            t.traits, t.namespace_overrides, t.namespaces_applicable
                        ),
                    }
                    for t in tools
                ],
            }
        )
    text = preview.document(render_unseen(unseen_tools(run.resolution)))
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


@router.post("/agents/{agent}/dry-run", openapi_extra=JSON_BODY)
def dry_run_round(
    request: HttpRequest,
    agent: str,
    multi_action_mode: str | None = None,
    profile: str | None = None,
    react_version: str | None = None,
) -> Any:
    """Run a round through the runtime's pipeline (as `traitdeck dry-run`): the online overseer,
    early starts and the ledger, the post-generation backstop when multi-action is on. The mode
    comes from the round's own `multi_action_mode`, else this query parameter, else the
    instruction `profile` (or the agent's default profile), else the server setting. The react
    agent (`v2`, KDCube's default, or `v3`) from the round's `react_version`, else this query
    parameter, else the setting `TRAITDECK_REACT_AGENT_VERSION`; the answer says which
    (`react_version`, `react_version_source`)."""
    if react_version is not None and react_version.strip().lower() not in REACT_VERSIONS:
        raise HttpError(422, "react_version must be v2 or v3.")
    state = draft_state()
    run = agent_prediction(state, agent)
    spec = parse_round_spec(read_json(request, limit=WEB_MAX_BYTES))
    mode = dry_run_mode(state, agent, spec, mode=multi_action_mode, profile=profile)
    version, source = dry_run_version(spec, react_version)
    result = dry_run(
        spec, run.resolution, multi_action_mode=mode, react_version=version, version_source=source
    )
    return {**result, "resolved_agent": run.resolved_agent}
