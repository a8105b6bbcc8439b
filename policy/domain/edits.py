"""Edits of a policy document, as pure functions (the editor's services call these).

Every edit returns a NEW document and never drops keys it does not manage: a connection's unknown
keys (``module``, ``discovery``, ``runtime``, …) and a trait mapping's extension keys survive.
Raises ``EditError`` with a plain sentence when the edit cannot apply.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.vocabulary import CONCRETE_STRATEGIES, EARLY_PROFILE
from engine.tools.connections import NAMESPACE_LIST_KEYS, OPERATION_CALLABLES

AGENT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
DESIGN_FIELDS = (
    "timeout_s",
    "mode",
    "retry",
    "confirm",
    "async_alternative",
    "status_tool",
    "compensation",
)


class EditError(ValueError):
    """The edit cannot apply to this document (unknown agent, bad name, stale index…)."""


def as_sentence(text: str) -> str:
    """An ``EditError`` message as people read it: capitalized, ending with a full stop."""
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


def _agents(doc: dict[str, Any]) -> dict[str, Any]:
    try:
        agents = doc["surfaces"]["as_consumer"]["agents"]
    except (KeyError, TypeError):
        raise EditError("the policy has no surfaces.as_consumer.agents mapping") from None
    if not isinstance(agents, dict):
        raise EditError("surfaces.as_consumer.agents is not a mapping")
    return agents


def _agent(doc: dict[str, Any], agent: str) -> dict[str, Any]:
    agents = _agents(doc)
    if agent not in agents:
        raise EditError(f"there is no agent {agent!r}")
    if agents[agent] is None:
        agents[agent] = {}
    if not isinstance(agents[agent], dict):
        raise EditError(f"agent {agent!r} is not a mapping; fix it in YAML first")
    value: dict[str, Any] = agents[agent]
    return value


def _tools(doc: dict[str, Any], agent: str) -> list[Any]:
    body = _agent(doc, agent)
    tools = body.setdefault("tools", [])
    if tools is None:
        tools = body["tools"] = []
    if not isinstance(tools, list):
        raise EditError(f"agents.{agent}.tools is not a list; fix it in YAML first")
    return tools


def _connection(doc: dict[str, Any], agent: str, index: int) -> dict[str, Any]:
    tools = _tools(doc, agent)
    if not 0 <= index < len(tools):
        raise EditError(f"agent {agent!r} has no connection #{index + 1}")
    connection = tools[index]
    if not isinstance(connection, dict):
        raise EditError(f"connection #{index + 1} of {agent!r} is not a mapping")
    return connection


def check_agent_name(name: str) -> str:
    name = name.strip()
    if not AGENT_NAME.match(name):
        raise EditError(
            "an agent name is 1–100 letters, digits, '_', '-' or '.', starting with a letter,"
            " digit or '_'"
        )
    return name


def add_agent(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    new = copy.deepcopy(dict(doc))
    name = check_agent_name(name)
    agents = _agents(new)
    if name in agents:
        raise EditError(f"an agent named {name!r} already exists")
    agents[name] = {"tools": []}
    return new


def rename_agent(doc: Mapping[str, Any], old: str, new_name: str) -> dict[str, Any]:
    """Rename in place: the agent keeps its position among the agents."""
    new = copy.deepcopy(dict(doc))
    new_name = check_agent_name(new_name)
    agents = _agents(new)
    if old not in agents:
        raise EditError(f"there is no agent {old!r}")
    if new_name != old and new_name in agents:
        raise EditError(f"an agent named {new_name!r} already exists")
    renamed = {(new_name if key == old else key): value for key, value in agents.items()}
    agents.clear()
    agents.update(renamed)
    return new


def remove_agent(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    new = copy.deepcopy(dict(doc))
    agents = _agents(new)
    if name not in agents:
        raise EditError(f"there is no agent {name!r}")
    del agents[name]
    return new


def _apply_fields(target: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """Set each field; ``None`` removes it. Existing keys keep their position."""
    for key, value in fields.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def add_connection(doc: Mapping[str, Any], agent: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(dict(doc))
    connection: dict[str, Any] = {}
    _apply_fields(connection, fields)
    _tools(new, agent).append(connection)
    return new


def update_connection(
    doc: Mapping[str, Any], agent: str, index: int, fields: Mapping[str, Any]
) -> dict[str, Any]:
    """Change the fields the form manages; every other key of the connection is kept."""
    new = copy.deepcopy(dict(doc))
    _apply_fields(_connection(new, agent, index), fields)
    return new


def remove_connection(doc: Mapping[str, Any], agent: str, index: int) -> dict[str, Any]:
    new = copy.deepcopy(dict(doc))
    _connection(new, agent, index)
    del _tools(new, agent)[index]
    return new


def move_connection(doc: Mapping[str, Any], agent: str, index: int, to: int) -> dict[str, Any]:
    new = copy.deepcopy(dict(doc))
    _connection(new, agent, index)
    tools = _tools(new, agent)
    if not 0 <= to < len(tools):
        raise EditError(f"cannot move connection #{index + 1} to position {to + 1}")
    tools.insert(to, tools.pop(index))
    return new


def build_traits(
    existing: Mapping[str, Any] | None,
    *,
    strategy: Sequence[str],
    early: bool,
    execution_fields: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A tool's new trait mapping from the editor's controls.

    ``strategy``: the ticked values (none ticked → no ``strategy`` key: the runtime reads
    unknown). ``early`` writes the complete four-field profile; otherwise the advanced fields are
    written as typed (empty ones left out) so the admin sees exactly what the runtime would get.
    Extension keys of the trait mapping and extra execution fields (e.g. ``queue``) are kept.
    """
    traits: dict[str, Any] = dict(existing or {})
    chosen = [value for value in CONCRETE_STRATEGIES if value in strategy]
    if chosen:
        traits["strategy"] = chosen
    else:
        traits.pop("strategy", None)
    old_execution = traits.get("execution")
    execution: dict[str, Any] = (
        {k: v for k, v in old_execution.items() if k not in EARLY_PROFILE}
        if isinstance(old_execution, Mapping)
        else {}
    )
    if early:
        profile = dict(EARLY_PROFILE)
    else:
        profile = {
            key: value.strip()
            for key, value in (execution_fields or {}).items()
            if key in EARLY_PROFILE and value and value.strip()
        }
    if profile:
        traits["execution"] = {**profile, **execution}
    elif execution:
        traits["execution"] = execution
    else:
        traits.pop("execution", None)
    return traits


def set_tool(
    doc: Mapping[str, Any],
    agent: str,
    index: int,
    key: str,
    *,
    traits: Mapping[str, Any] | None,
    design: Mapping[str, Any] | None,
    namespace: str | None = None,
    design_key: str | None = None,
) -> dict[str, Any]:
    """Write one tool's traits (``tool_traits[key]``) and execution design
    (``tool_execution[design_key or key]``) on a connection; an empty mapping removes the entry.
    With ``namespace``, write that named-service namespace's override instead of the default."""
    new = copy.deepcopy(dict(doc))
    connection = _connection(new, agent, index)
    holder = connection
    if namespace is not None:
        namespaces = connection.get("namespaces")
        if not isinstance(namespaces, dict) or not isinstance(namespaces.get(namespace), dict):
            raise EditError(f"connection #{index + 1} has no namespace {namespace!r}")
        holder = namespaces[namespace]
    _set_entry(holder, "tool_traits", key, traits)
    if namespace is None:
        _set_entry(connection, "tool_execution", design_key or key, design)
    return new


def _set_entry(
    holder: dict[str, Any], section: str, key: str, value: Mapping[str, Any] | None
) -> None:
    entries = holder.get(section)
    if entries is not None and not isinstance(entries, dict):
        raise EditError(f"{section} is not a mapping; fix it in YAML first")
    if value:
        if entries is None:
            entries = holder[section] = {}
        entries[key] = dict(value)
    elif entries is not None:
        entries.pop(key, None)
        if not entries:
            del holder[section]


def build_design(existing: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's execution design from the form: typed fields set, empty ones removed, unknown
    keys of an existing design kept."""
    design = dict(existing or {})
    _apply_fields(design, {k: fields.get(k) for k in DESIGN_FIELDS})
    return design


def design_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The managed design fields as the editor writes them, ready for :func:`build_design`:
    blank text and an unset ``confirm`` become ``None`` (the key is removed), a whole-number
    timeout is written as an int (``20``, not ``20.0``). Fields missing from ``values`` too."""
    fields: dict[str, Any] = {}
    for name in DESIGN_FIELDS:
        value = values.get(name)
        if name == "confirm":
            value = True if value else None
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str):
            value = value.strip() or None
        fields[name] = value
    return fields


@dataclass(frozen=True)
class NamespaceEdit:
    """One namespace row of the named-service form: its name, the operations ticked, and the name
    it had before (``None`` for a new row) so a renamed namespace keeps its block."""

    name: str
    operations: tuple[str, ...]
    original: str | None = None


def merge_operations(existing: Sequence[Any], chosen: Sequence[str]) -> list[Any]:
    """The namespace's new operation list: known operations as ticked (kept in place, new ones
    appended in the order of DESIGN §2.6); items the form cannot show (unknown operations, ``*``)
    stay where they were — the validator flags them, the editor never drops them silently."""
    ticked = {operation for operation in chosen if operation in OPERATION_CALLABLES}
    out: list[Any] = []
    for item in existing:
        known = isinstance(item, str) and item in OPERATION_CALLABLES
        if (not known or item in ticked) and item not in out:
            out.append(item)
    out += [
        operation
        for operation in OPERATION_CALLABLES
        if operation in ticked and operation not in out
    ]
    return out


def set_namespaces(
    doc: Mapping[str, Any], agent: str, index: int, namespaces: Sequence[NamespaceEdit]
) -> dict[str, Any]:
    """Set a named-service connection's namespaces and their operations, in the given order.

    Each namespace keeps every key the form does not manage (its per-namespace ``tool_traits``
    overrides, …) and the list key it already used (``allowed`` / ``allowed_operations`` /
    ``operations``; ``allowed`` for a new namespace). Namespaces left out are removed.
    """
    new = copy.deepcopy(dict(doc))
    connection = _connection(new, agent, index)
    old = connection.get("namespaces")
    old_blocks: dict[Any, Any] = old if isinstance(old, dict) else {}
    names = [edit.name.strip() for edit in namespaces]
    for name in names:
        if not name:
            raise EditError("a namespace needs a name")
    if len(set(names)) != len(names):
        duplicate = next(name for name in names if names.count(name) > 1)
        raise EditError(f"namespace {duplicate!r} is listed twice")
    blocks: dict[str, Any] = {}
    for name, edit in zip(names, namespaces, strict=True):
        previous = old_blocks.get(edit.original) if edit.original is not None else None
        block: dict[str, Any] = dict(previous) if isinstance(previous, dict) else {}
        list_key = next(
            (key for key in NAMESPACE_LIST_KEYS if isinstance(block.get(key), list)), "allowed"
        )
        existing = block.get(list_key)
        block[list_key] = merge_operations(
            existing if isinstance(existing, list) else [], edit.operations
        )
        blocks[name] = block
    if blocks:
        connection["namespaces"] = blocks
    else:
        connection.pop("namespaces", None)
    return new


def parse_name_list(text: str) -> list[str]:
    """A list typed by an admin: one per line or comma separated; blanks and repeats dropped."""
    out: list[str] = []
    for part in re.split(r"[,\n]", text):
        name = part.strip()
        if name and name not in out:
            out.append(name)
    return out


def tool_entries(
    doc: Mapping[str, Any],
    agent: str,
    index: int,
    key: str,
    *,
    design_key: str | None = None,
    namespace: str | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The trait mapping and execution design written for one tool (``None`` where there is no
    mapping): what the editor starts from. With ``namespace``, that namespace's override."""
    connection = _connection(copy.deepcopy(dict(doc)), agent, index)
    holder: Mapping[str, Any] | None = connection
    if namespace is not None:
        namespaces = _mapping_or_none(connection.get("namespaces")) or {}
        holder = _mapping_or_none(namespaces.get(namespace))
    entries = _mapping_or_none(holder.get("tool_traits")) if holder is not None else None
    traits = _mapping_or_none(entries.get(key)) if entries is not None else None
    design = None
    if namespace is None:
        designs = _mapping_or_none(connection.get("tool_execution")) or {}
        design = _mapping_or_none(designs.get(design_key or key))
    return traits, design


def _mapping_or_none(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def connection_mapping(doc: Mapping[str, Any], agent: str, index: int) -> dict[str, Any]:
    """A copy of one connection mapping, as the edits find it (raises ``EditError``)."""
    return _connection(copy.deepcopy(dict(doc)), agent, index)


def connection_count(doc: Mapping[str, Any], agent: str) -> int:
    """How many connections an agent lists (the index a new connection gets is one less)."""
    return len(_tools(copy.deepcopy(dict(doc)), agent))
