"""Policy editing API: agents, connections, a tool's traits and an agent's manifest — what the
browser editor does (issue 4), for scripts and other clients.

Every write goes through the same services and pure edits as the browser's forms, so an edit
made here and the same edit made in the browser leave the same draft. Writes accept
``If-Match: "<revision>"`` (a stale one: 409 and nothing changes; without it the edit applies to
the current draft) and answer with the new ``revision`` and the object they changed.

Bodies are read by hand (``read_json``) rather than as ninja body parameters so that each way a
body can be wrong keeps its status: 415 wrong type, 413 too large, 400 not JSON, 422 wrong shape.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
from django.http import HttpRequest
from ninja import Router, Status
from ninja.errors import HttpError, ValidationError
from pydantic import BaseModel

from accounts.auth import session_auth
from engine.document.diagnostics import Diagnostic
from engine.document.jsonable import jsonable
from engine.tools.connections import KINDS, WILDCARD, Connection
from engine.tools.resolution import effective_tool_json
from policy.api import agent_or_404
from policy.api_edit_schemas import (
    CONNECTION_BODY,
    MANIFEST_BODY,
    READ_ERRORS,
    WRITE_ERRORS,
    AgentNameIn,
    AgentRemoveOut,
    AgentsOut,
    AgentWriteOut,
    ConnectionRemoveOut,
    ConnectionsOut,
    ConnectionWriteOut,
    ManifestRemoveOut,
    ManifestWriteOut,
    MoveIn,
    ToolIn,
    ToolWriteOut,
    model_body,
)
from policy.audit_notes import (
    agent_added,
    connection_added,
    connection_edited,
    connection_moved,
    connection_removed,
    tool_edited,
)
from policy.domain.edits import (
    EditError,
    add_agent,
    add_connection,
    as_sentence,
    build_design,
    build_traits,
    check_agent_name,
    connection_count,
    connection_mapping,
    design_fields,
    move_connection,
    remove_connection,
    update_connection,
)
from policy.domain.placement import Placement, entry_keys, tool_rows
from policy.domain.tool_edit import ToolTarget, UnknownToolError, find_tool
from policy.domain.yaml_io import WEB_MAX_BYTES
from policy.forms import MANIFEST_MAX_BYTES
from policy.selectors import (
    AgentSummary,
    DraftState,
    agent_placement,
    agent_resolution,
    agent_summaries,
    draft_state,
)
from policy.services import (
    agent_remove,
    agent_rename,
    draft_change,
    manifest_remove,
    manifest_upload,
)
from web.api_io import if_match_revision, read_json, read_object

router = Router(tags=["policy editing"], auth=session_auth)

# --- request bodies ------------------------------------------------------------------------------


def read_shape[Model: BaseModel](request: HttpRequest, model: type[Model]) -> Model:
    """The body validated against ``model``; a wrong shape is 422 with each problem named."""
    data = read_object(request, limit=WEB_MAX_BYTES)
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False):
            # "input" may be large (and the client sent it); "ctx" may hold an exception.
            detail: dict[str, Any] = {k: v for k, v in error.items() if k != "input"}
            if "ctx" in error:
                detail["ctx"] = {key: str(value) for key, value in error["ctx"].items()}
            errors.append({**detail, "loc": ("body", *error["loc"])})
        raise ValidationError(errors) from None


def connection_fields(request: HttpRequest) -> dict[str, Any]:
    """A connection mapping from the body: keys as written; ``kind`` one the runtime knows."""
    fields = read_object(request, limit=WEB_MAX_BYTES)
    kind = fields.get("kind")
    if kind is not None and kind not in KINDS:
        got = json.dumps(kind)[:60]
        raise HttpError(422, f"kind must be one of {', '.join(KINDS)} (got {got}).")
    return fields


# --- responses -----------------------------------------------------------------------------------


def _diagnostics(found: tuple[Diagnostic, ...]) -> list[dict[str, Any]]:
    return [diagnostic.to_dict() for diagnostic in found]


def _connection_out(connection: Connection, placement: Placement) -> dict[str, Any]:
    index = connection.index
    return {
        "index": index,
        "kind": connection.kind,
        "alias": connection.alias,
        "problem": connection.problem,
        "connection": jsonable(connection.raw),
        "diagnostics": _diagnostics(placement.for_connection(index)),
        "tools": [
            {
                "name": name,
                "id": connection.tool_id(name),
                "key": entry_keys(connection, name)[0],
                "diagnostics": _diagnostics(placement.for_tool(index, name)),
            }
            for name in tool_rows(connection)
        ],
    }


def _connection_at(state: DraftState, agent: str, index: int) -> dict[str, Any]:
    resolution = agent_resolution(state, agent)
    connection = resolution.connection(index)
    assert connection is not None  # just written as a mapping
    return _connection_out(connection, agent_placement(state, resolution))


def _summary(state: DraftState, agent: str) -> AgentSummary:
    return next(row for row in agent_summaries(state) if row.name == agent)


def _tool_out(state: DraftState, target: ToolTarget) -> dict[str, Any]:
    resolution = agent_resolution(state, target.agent)
    traits, design = target.entries(state.data)
    tool = None if target.name == WILDCARD else resolution.find(target.tool_id)
    placement = agent_placement(state, resolution)
    return {
        "id": target.tool_id,
        "name": target.name,
        "key": target.trait_key,
        "namespace": target.namespace,
        "traits": jsonable(traits),
        "design": jsonable(design),
        "diagnostics": _diagnostics(placement.for_tool(target.index, target.name)),
        "effective": effective_tool_json(tool) if tool is not None else None,
    }


def _require_connection(state: DraftState, agent: str, index: int) -> Connection:
    connection = agent_or_404(state, agent).connection(index)
    if connection is None:
        raise HttpError(404, f"Agent {agent!r} has no connection at index {index}.")
    return connection


def _agent_name(name: str) -> str:
    try:
        return check_agent_name(name)
    except EditError as exc:
        raise HttpError(422, as_sentence(str(exc))) from None


# --- agents --------------------------------------------------------------------------------------


@router.get("/agents", response={200: AgentsOut})
def agent_list(request: HttpRequest) -> Any:
    """Every agent with its connection and tool counts and its error/warning counts (as the
    agents page shows them)."""
    state = draft_state()
    return {"revision": state.revision, "agents": agent_summaries(state)}


@router.post(
    "/agents", response={201: AgentWriteOut, **WRITE_ERRORS}, openapi_extra=model_body(AgentNameIn)
)
def agent_create(request: HttpRequest) -> Any:
    """Add an agent (with no connections)."""
    name = _agent_name(read_shape(request, AgentNameIn).name)
    state = draft_change(
        edit=lambda doc: add_agent(doc, name),
        base_revision=if_match_revision(request),
        user=request.user,
        audit=agent_added(name),
    )
    return Status(201, {"revision": state.revision, "agent": _summary(state, name)})


@router.patch(
    "/agents/{agent}",
    response={200: AgentWriteOut, **WRITE_ERRORS},
    openapi_extra=model_body(AgentNameIn),
)
def agent_patch(request: HttpRequest, agent: str) -> Any:
    """Rename an agent; its manifest follows."""
    agent_or_404(draft_state(), agent)
    name = _agent_name(read_shape(request, AgentNameIn).name)
    state = agent_rename(
        agent=agent, new_name=name, base_revision=if_match_revision(request), user=request.user
    )
    return {"revision": state.revision, "agent": _summary(state, name)}


@router.delete("/agents/{agent}", response={200: AgentRemoveOut, **WRITE_ERRORS})
def agent_delete(request: HttpRequest, agent: str) -> Any:
    """Remove an agent and its manifest."""
    agent_or_404(draft_state(), agent)
    state = agent_remove(agent=agent, base_revision=if_match_revision(request), user=request.user)
    return {"revision": state.revision, "removed": {"name": agent}}


# --- connections ---------------------------------------------------------------------------------


@router.get("/agents/{agent}/connections", response={200: ConnectionsOut, **READ_ERRORS})
def connection_list(request: HttpRequest, agent: str) -> Any:
    """The agent's connections in order, each as stored, with the diagnostics placed on it and
    on its tool rows; ``diagnostics`` at the top are about the agent itself."""
    state = draft_state()
    resolution = agent_or_404(state, agent)
    placement = agent_placement(state, resolution)
    return {
        "revision": state.revision,
        "agent": agent,
        "diagnostics": _diagnostics(placement.agent),
        "connections": [_connection_out(c, placement) for c in resolution.connections],
    }


@router.post(
    "/agents/{agent}/connections",
    response={201: ConnectionWriteOut, **WRITE_ERRORS},
    openapi_extra=CONNECTION_BODY,
)
def connection_create(request: HttpRequest, agent: str) -> Any:
    """Append a connection (the body is the mapping; saving one with errors is allowed, the
    diagnostics say what is wrong)."""
    agent_or_404(draft_state(), agent)
    fields = connection_fields(request)
    state = draft_change(
        edit=lambda doc: add_connection(doc, agent, fields),
        base_revision=if_match_revision(request),
        user=request.user,
        audit=connection_added(agent),
    )
    index = connection_count(state.data, agent) - 1
    return Status(
        201, {"revision": state.revision, "connection": _connection_at(state, agent, index)}
    )


@router.patch(
    "/agents/{agent}/connections/{index}",
    response={200: ConnectionWriteOut, **WRITE_ERRORS},
    openapi_extra=CONNECTION_BODY,
)
def connection_patch(request: HttpRequest, agent: str, index: int) -> Any:
    """Set the given keys (``null`` removes one); every other key of the connection is kept."""
    _require_connection(draft_state(), agent, index)
    fields = connection_fields(request)
    state = draft_change(
        edit=lambda doc: update_connection(doc, agent, index, fields),
        base_revision=if_match_revision(request),
        user=request.user,
        audit=connection_edited(agent, index),
    )
    return {"revision": state.revision, "connection": _connection_at(state, agent, index)}


@router.delete(
    "/agents/{agent}/connections/{index}", response={200: ConnectionRemoveOut, **WRITE_ERRORS}
)
def connection_delete(request: HttpRequest, agent: str, index: int) -> Any:
    """Remove a connection; the ones after it move up."""
    _require_connection(draft_state(), agent, index)
    removed: list[dict[str, Any]] = []

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        # What was at the index when the edit ran (without If-Match the draft may have moved).
        removed.append(connection_mapping(doc, agent, index))
        return remove_connection(doc, agent, index)

    state = draft_change(
        edit=edit,
        base_revision=if_match_revision(request),
        user=request.user,
        audit=connection_removed(agent, index),
    )
    return {
        "revision": state.revision,
        "removed": {"index": index, "connection": jsonable(removed[-1])},
    }


@router.post(
    "/agents/{agent}/connections/{index}/move",
    response={200: ConnectionWriteOut, **WRITE_ERRORS},
    openapi_extra=model_body(MoveIn),
)
def connection_move(request: HttpRequest, agent: str, index: int) -> Any:
    """Move a connection to index ``to`` (the others keep their order)."""
    _require_connection(draft_state(), agent, index)
    to = read_shape(request, MoveIn).to
    state = draft_change(
        edit=lambda doc: move_connection(doc, agent, index, to),
        base_revision=if_match_revision(request),
        user=request.user,
        audit=connection_moved(agent, index, to),
    )
    return {"revision": state.revision, "connection": _connection_at(state, agent, to)}


# --- one tool ------------------------------------------------------------------------------------


@router.put(
    "/agents/{agent}/connections/{index}/tools/{key}",
    response={200: ToolWriteOut, **WRITE_ERRORS},
    openapi_extra=model_body(ToolIn),
)
def tool_put(request: HttpRequest, agent: str, index: int, key: str) -> Any:
    """Write a tool's traits (`tool_traits[key]`) and execution design (`tool_execution[key]`),
    as the tool editor saves them. Answers with the tool's diagnostics after the change and its
    effective traits. A namespace override and the MCP wildcard carry traits only."""
    state = draft_state()
    resolution = agent_or_404(state, agent)
    body = read_shape(request, ToolIn)
    try:
        target = find_tool(resolution, index, key, body.namespace)
    except UnknownToolError as exc:
        raise HttpError(404, str(exc)) from None
    if body.design is not None and not target.with_design:
        raise HttpError(
            422,
            "A namespace override and the MCP wildcard carry traits only: leave design out.",
        )
    execution = body.execution.model_dump(exclude_none=True) if body.execution else {}
    design = design_fields(body.design.model_dump() if body.design else {})
    edit = target.edit(
        lambda old: build_traits(
            old, strategy=body.strategy, early=body.early, execution_fields=execution
        ),
        lambda old: build_design(old, design),
    )
    new_state = draft_change(
        edit=edit,
        base_revision=if_match_revision(request),
        user=request.user,
        audit=tool_edited(target),
    )
    return {"revision": new_state.revision, "tool": _tool_out(new_state, target)}


# --- manifest ------------------------------------------------------------------------------------


@router.put(
    "/agents/{agent}/manifest",
    response={200: ManifestWriteOut, **WRITE_ERRORS},
    openapi_extra=MANIFEST_BODY,
)
def manifest_put(request: HttpRequest, agent: str) -> Any:
    """Store the agent's manifest (the tools and intrinsic traits the runtime discovered). It is
    not part of the draft document, but it changes the draft's meaning: the revision grows, and a
    stale ``If-Match`` is refused (409, nothing stored)."""
    agent_or_404(draft_state(), agent)
    data = read_json(request, limit=MANIFEST_MAX_BYTES)
    manifest_upload(
        agent=agent, data=data, user=request.user, base_revision=if_match_revision(request)
    )
    return {"revision": draft_state().revision, "agent": agent, "manifest": jsonable(data)}


@router.delete("/agents/{agent}/manifest", response={200: ManifestRemoveOut, **WRITE_ERRORS})
def manifest_delete(request: HttpRequest, agent: str) -> Any:
    """Remove the agent's manifest."""
    agent_or_404(draft_state(), agent)
    if not manifest_remove(
        agent=agent, base_revision=if_match_revision(request), user=request.user
    ):
        raise HttpError(404, f"Agent {agent!r} has no manifest.")
    return {"revision": draft_state().revision, "removed": {"agent": agent}}
