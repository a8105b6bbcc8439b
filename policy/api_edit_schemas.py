"""The policy editing API's request and response schemas (``policy.api_edit``): the bodies it
reads, what it answers, and the OpenAPI request bodies it documents for bodies read by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from ninja import Schema
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from core.vocabulary import CONCRETE_STRATEGIES
from engine.tools.connections import KINDS
from engine.traits.execution_design import MODES, RETRIES
from policy.api import ConflictOut, DiagnosticOut
from web.api_io import request_body

# --- request bodies ------------------------------------------------------------------------------


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return check


def _enum(choices: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(choices)}


Strategy = Annotated[
    str, AfterValidator(_one_of(CONCRETE_STRATEGIES)), WithJsonSchema(_enum(CONCRETE_STRATEGIES))
]
Mode = Annotated[str, AfterValidator(_one_of(MODES)), WithJsonSchema(_enum(MODES))]
Retry = Annotated[str, AfterValidator(_one_of(RETRIES)), WithJsonSchema(_enum(RETRIES))]


class BodyIn(BaseModel):
    # strict: a JSON "true" is no name and 1 is no boolean; forbid: a misspelt key is an error,
    # not a silently ignored field.
    model_config = ConfigDict(strict=True, extra="forbid")


class AgentNameIn(BodyIn):
    name: str


class MoveIn(BodyIn):
    to: int = Field(ge=0, le=100_000, description="The connection's new index (0-based).")


class ExecutionIn(BodyIn):
    """The four execution fields as typed (ignored when ``early`` writes the whole profile)."""

    trigger: str | None = None
    concurrency: str | None = None
    result_dependency: str | None = None
    replay: str | None = None


class DesignIn(BodyIn):
    """The execution design (DESIGN §2.8); a field left out or ``null`` is removed."""

    timeout_s: float | None = Field(default=None, gt=0, le=10**9, allow_inf_nan=False)
    mode: Mode | None = None
    retry: Retry | None = None
    confirm: bool | None = None
    async_alternative: str | None = None
    status_tool: str | None = None
    compensation: str | None = None


class ToolIn(BodyIn):
    """What the tool editor's form holds. ``strategy`` empty: the key is removed (unknown, runs
    alone); ``early`` writes the complete four-field profile. Trait extension keys, extra
    execution fields and unknown design keys already written are kept."""

    strategy: list[Strategy]
    early: bool
    execution: ExecutionIn | None = None
    design: DesignIn | None = None
    namespace: str | None = Field(
        default=None, description="A named-service namespace: write its override instead."
    )


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """A JSON schema with its ``$defs`` written in place (OpenAPI has no ``#/$defs``)."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {key: _inline_refs(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline_refs(item, defs) for item in node]
    return node


def model_body(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    return request_body(_inline_refs(schema, schema.pop("$defs", {})))


CONNECTION_BODY = request_body(
    {
        "type": "object",
        "description": "Connection keys and values; on PATCH, null removes a key.",
        "properties": {"kind": {"anyOf": [_enum(KINDS), {"type": "null"}]}},
        "additionalProperties": True,
    }
)
MANIFEST_BODY = request_body(
    {
        "type": "object",
        "description": 'The runtime-discovered tools: {"<tool id>": {"tool_traits": {…}}, …}.',
        "additionalProperties": {"type": "object"},
    }
)


# --- responses -----------------------------------------------------------------------------------


class ErrorOut(Schema):
    error: str


class AgentOut(Schema):
    name: str
    url: str | None
    connections: int
    tools: int
    errors: int
    warnings: int


class AgentsOut(Schema):
    revision: int
    agents: list[AgentOut]


class AgentWriteOut(Schema):
    revision: int
    agent: AgentOut


class RemovedAgentOut(Schema):
    name: str


class AgentRemoveOut(Schema):
    revision: int
    removed: RemovedAgentOut


class ToolRowOut(Schema):
    """A tool row of a connection: ``key`` is the ``tool_traits`` key the PUT takes."""

    name: str
    id: str
    key: str
    diagnostics: list[DiagnosticOut]


class ConnectionOut(Schema):
    """``connection`` is the mapping as stored; ``kind`` and ``alias`` as the runtime reads them
    (``null`` when it cannot), ``problem`` why it cannot load it."""

    index: int
    kind: str | None
    alias: str | None
    problem: str | None
    connection: dict[str, Any]
    diagnostics: list[DiagnosticOut]
    tools: list[ToolRowOut]


class ConnectionsOut(Schema):
    revision: int
    agent: str
    diagnostics: list[DiagnosticOut]
    connections: list[ConnectionOut]


class ConnectionWriteOut(Schema):
    revision: int
    connection: ConnectionOut


class RemovedConnectionOut(Schema):
    index: int
    connection: dict[str, Any]


class ConnectionRemoveOut(Schema):
    revision: int
    removed: RemovedConnectionOut


class ToolOut(Schema):
    """``traits`` and ``design`` as written; ``effective`` as in ``GET …/effective`` (``null``
    for the MCP wildcard, which is no tool of its own)."""

    id: str
    name: str
    key: str
    namespace: str | None
    traits: dict[str, Any] | None
    design: dict[str, Any] | None
    diagnostics: list[DiagnosticOut]
    effective: dict[str, Any] | None


class ToolWriteOut(Schema):
    revision: int
    tool: ToolOut


class ManifestWriteOut(Schema):
    revision: int
    agent: str
    manifest: dict[str, Any]


class RemovedManifestOut(Schema):
    agent: str


class ManifestRemoveOut(Schema):
    revision: int
    removed: RemovedManifestOut


READ_ERRORS: dict[int, Any] = {404: ErrorOut}
WRITE_ERRORS: dict[int, Any] = {
    400: ErrorOut,
    404: ErrorOut,
    409: ConflictOut,
    413: ErrorOut,
    415: ErrorOut,
    422: ErrorOut,
}
