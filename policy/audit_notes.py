"""What an audit entry says about a draft change: its action, what it names, and the part of the
policy it shows before and after.

``draft_change`` takes one :class:`AuditNote` and records ONE entry per change. The note carries
a function that picks the part that changed out of a policy document; it runs on the document
before and after the edit, inside the same transaction, so the entry shows exactly what the
edit did even when the draft moved since the form was loaded (an API call without ``If-Match``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.document.jsonable import jsonable
from engine.tools.resolution import agent_names
from policy.domain.edits import EditError, connection_mapping
from policy.domain.tool_edit import ToolTarget
from policy.domain.yaml_io import body_hash, dump_body

#: From a policy document to the part an entry shows (``None``: it is not there).
Part = Callable[[Mapping[str, Any]], Any]

# Action names, one place (the audit page offers them as a filter).
AGENT_ADD = "agent.add"
AGENT_RENAME = "agent.rename"
AGENT_REMOVE = "agent.remove"
CONNECTION_ADD = "connection.add"
CONNECTION_EDIT = "connection.edit"
CONNECTION_REMOVE = "connection.remove"
CONNECTION_MOVE = "connection.move"
TOOL_EDIT = "tool.edit"
MANIFEST_UPLOAD = "manifest.upload"
MANIFEST_REMOVE = "manifest.remove"
POLICY_IMPORT = "policy.import"
DRAFT_EDIT = "draft.edit"


def policy_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The whole policy as an entry shows it: its export hash, its agents and its export body
    (so the entry keeps what an import or a rollback replaced)."""
    body = dump_body(dict(doc))
    return {"sha256": body_hash(body), "agents": agent_names(dict(doc)), "export": body}


@dataclass(frozen=True)
class AuditNote:
    """How to record one draft change: ``show`` turns the documents before and after the edit
    into what the entry shows; ``ref`` says where the thing lives (for a link)."""

    action: str
    target: str
    show: Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[Any, Any]]
    ref: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def before_after(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[Any, Any]:
        before, after = self.show(old, new)
        return jsonable(before), jsonable(after)


def _safe(part: Part, doc: Mapping[str, Any]) -> Any:
    # A part that is not there (an agent not yet added, or removed) is ``None``: the entry is
    # recorded whatever the document looks like.
    try:
        return part(doc)
    except (EditError, KeyError, IndexError, TypeError, AttributeError):
        return None


def same_part(part: Part) -> Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[Any, Any]]:
    """Show the same part of the policy before and after."""
    return lambda old, new: (_safe(part, old), _safe(part, new))


def _agent_section(doc: Mapping[str, Any], agent: str) -> Any:
    return doc["surfaces"]["as_consumer"]["agents"][agent]


def _connections(doc: Mapping[str, Any], agent: str) -> list[Any]:
    tools = _agent_section(doc, agent).get("tools")
    return tools if isinstance(tools, list) else []


def agent_added(agent: str) -> AuditNote:
    part = same_part(lambda doc: _agent_section(doc, agent))
    return AuditNote(AGENT_ADD, f"agent {agent}", part, {"agent": agent})


def agent_renamed(old: str, new: str) -> AuditNote:
    return AuditNote(
        AGENT_RENAME,
        f"agent {old} → {new}",
        lambda _old, _new: ({"name": old}, {"name": new}),
        {"agent": new},
    )


def agent_removed(agent: str) -> AuditNote:
    part = same_part(lambda doc: _agent_section(doc, agent))
    return AuditNote(AGENT_REMOVE, f"agent {agent}", part, {"agent": agent})


def connection_target(agent: str, index: int) -> str:
    return f"agent {agent} · connection #{index + 1}"


def connection_added(agent: str) -> AuditNote:
    """A new connection is appended: the entry shows the last one after the edit."""

    def show(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[Any, Any]:
        added = _safe(lambda doc: _connections(doc, agent)[-1], new)
        return None, added

    return AuditNote(CONNECTION_ADD, f"agent {agent} · new connection", show, {"agent": agent})


def connection_edited(agent: str, index: int) -> AuditNote:
    return AuditNote(
        CONNECTION_EDIT,
        connection_target(agent, index),
        same_part(lambda doc: connection_mapping(doc, agent, index)),
        {"agent": agent, "connection": index},
    )


def connection_removed(agent: str, index: int) -> AuditNote:
    # After the removal the next connection sits at the index: show only what was removed.
    def show(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[Any, Any]:
        return _safe(lambda doc: connection_mapping(doc, agent, index), old), None

    return AuditNote(CONNECTION_REMOVE, connection_target(agent, index), show, {"agent": agent})


def connection_moved(agent: str, index: int, to: int) -> AuditNote:
    def order(doc: Mapping[str, Any]) -> list[str]:
        return [_connection_label(item, n) for n, item in enumerate(_connections(doc, agent))]

    return AuditNote(
        CONNECTION_MOVE,
        f"agent {agent} · connection #{index + 1} → #{to + 1}",
        same_part(order),
        {"agent": agent, "connection": to},
    )


def _connection_label(item: Any, n: int) -> str:
    """A connection as a short line (the order before and after a move)."""
    if not isinstance(item, Mapping):
        return f"#{n + 1}"
    alias = item.get("alias")
    return f"#{n + 1} {item.get('kind', '?')}" + (f" {alias}" if alias else "")


def tool_edited(target: ToolTarget) -> AuditNote:
    """A tool's own trait mapping and execution design (a namespace override: its traits)."""

    def part(doc: Mapping[str, Any]) -> Any:
        traits, design = target.entries(doc)
        return {"traits": traits, "design": design} if target.with_design else {"traits": traits}

    where = f" (namespace {target.namespace})" if target.namespace else ""
    ref = {
        "agent": target.agent,
        "connection": target.index,
        "key": target.key,
        "namespace": target.namespace,
        "tool": target.tool_id,
    }
    return AuditNote(
        TOOL_EDIT, f"tool {target.agent} · {target.tool_id}{where}", same_part(part), ref
    )


def policy_replaced(action: str = POLICY_IMPORT, *, message: str = "") -> AuditNote:
    """The whole draft replaced (an import; a rollback passes its own action): the export hash
    and agents before and after, and both export bodies so nothing replaced is lost."""
    return AuditNote(action, "policy", same_part(policy_summary), {}, message)


#: What a change recorded without a note shows: the whole policy before and after.
DRAFT_EDITED = policy_replaced(DRAFT_EDIT)
