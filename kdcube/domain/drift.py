"""What changed in KDCube's owned subtree, named down to the trait, without keeping secrets.

KDCube answers its props with ``env:``/``file:`` references resolved anywhere, so a value read
from it may be a secret. Traitdeck keeps a *redacted* copy of the owned subtree (the guard's
baseline): every mapping key (agent, tool, field names), and the values of an allow-list — a
trait's ``strategy`` and execution fields, ``tool_execution`` fields, ``allowed`` entries and the
connection's ``name``/``server_id``/``alias`` — in plain text; any other value is replaced by a
keyed digest, which tells that it changed but not what it holds.

:func:`changes` compares two redacted subtrees and names each difference as people read it
("`main` → connection `web` → `web_search`: strategy [exploration] → [exploitation]"), with
"a value changed" where the value is not on the allow-list.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

#: A value Traitdeck does not show: a keyed digest of it follows.
HIDDEN: Final = "#value:"
#: Keys whose values are shown (under ``agents``); everything under ``tool_execution`` too.
SHOWN_KEYS: Final = frozenset(
    {
        "strategy",
        "execution",
        "trigger",
        "concurrency",
        "result_dependency",
        "replay",
        "allowed",
        "name",
        "server_id",
        "alias",
    }
)
SHOWN_UNDER: Final = frozenset({"tool_execution"})
#: Lines a drift or refusal shows before "and N more".
MAX_LINES: Final = 20


def redacted(node: Any, key: bytes, path: tuple[Any, ...] = ()) -> Any:
    """``node`` (an owned subtree) with every value off the allow-list replaced by its digest."""
    if isinstance(node, Mapping):
        return {str(k): redacted(v, key, (*path, str(k))) for k, v in node.items()}
    if isinstance(node, list):
        return [redacted(v, key, (*path, i)) for i, v in enumerate(node)]
    if node is None or _shown(path):
        return node
    text = json.dumps(node, sort_keys=True, ensure_ascii=False)
    return HIDDEN + hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()[:24]


def _shown(path: tuple[Any, ...]) -> bool:
    names = [p for p in path if isinstance(p, str)]
    if not names or names[0] != "agents":
        return False
    if any(n in SHOWN_UNDER for n in names):
        return True
    return names[-1] in SHOWN_KEYS


def _hidden(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith(HIDDEN)
    if isinstance(value, Mapping):
        return any(_hidden(v) for v in value.values())
    if isinstance(value, list):
        return any(_hidden(v) for v in value)
    return False


def show(value: Any) -> str:
    """A shown value as people read it: lists in brackets, mappings as ``key: value``."""
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    return str(value)


@dataclass(frozen=True)
class Change:
    """One difference: where (labels people read), what field, and the values when shown."""

    where: tuple[str, ...]
    field: str = ""
    #: ``changed``, ``added``, ``removed``, ``hidden`` (a value changed), or ``note``.
    kind: str = "changed"
    before: str | None = None
    after: str | None = None
    noun: str = ""

    @property
    def path(self) -> str:
        out = " → ".join(self.where)
        if not out:
            return self.field
        return f"{out}: {self.field}" if self.field else out

    @property
    def text(self) -> str:
        if self.kind == "note":
            return self.field
        where = " → ".join(self.where)
        if self.noun:
            where = f"{self.noun} {where}"
        if self.kind in ("added", "removed"):
            field = _FIELD_NAMES.get(self.field, self.field)
            head = (
                f"{where}: {field} {self.kind}"
                if where and field
                else f"{where or field} {self.kind}"
            )
            value = self.after if self.kind == "added" else self.before
            return f"{head} ({value})" if value is not None else head
        if self.kind == "hidden":
            return f"{self.path}: a value changed"
        return f"{self.path} {self.before} → {self.after}"

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after, "text": self.text}


_FIELD_NAMES: Final = {"tool_traits": "traits", "tool_execution": "execution settings"}


def _q(name: Any) -> str:
    return f"`{name}`"


def _conn_id(conn: Any, index: int) -> str:
    if isinstance(conn, Mapping):
        for key in ("name", "server_id", "alias"):
            value = conn.get(key)
            if isinstance(value, str) and value and not value.startswith(HIDDEN):
                return value
    return f"#{index + 1}"


def _connections(tools: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(tools, list):
        for index, conn in enumerate(tools):
            out.setdefault(_conn_id(conn, index), conn)
    return out


def _leaf(where: tuple[str, ...], field: str, before: Any, after: Any) -> list[Change]:
    if before == after:
        return []
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: list[Change] = []
        for key in _keys(before, after):
            sub = f"{field}.{key}" if field else str(key)
            out.extend(_leaf(where, sub, before.get(key), after.get(key)))
        return out
    if before is None:
        shown = None if _hidden(after) else show(after)
        return [Change(where, field, "added", None, shown)]
    if after is None:
        shown = None if _hidden(before) else show(before)
        return [Change(where, field, "removed", shown, None)]
    if _hidden(before) or _hidden(after):
        return [Change(where, field, "hidden")]
    return [Change(where, field, "changed", show(before), show(after))]


def _keys(a: Any, b: Any) -> list[str]:
    keys = list(a) if isinstance(a, Mapping) else []
    for key in b if isinstance(b, Mapping) else []:
        if key not in keys:
            keys.append(key)
    return keys


def _connection(
    where: tuple[str, ...], before: Mapping[str, Any], after: Mapping[str, Any]
) -> list[Change]:
    out: list[Change] = []
    for key in _keys(before, after):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key in ("tool_traits", "tool_execution") and (
            isinstance(old, Mapping | None) and isinstance(new, Mapping | None)
        ):
            old_map, new_map = old or {}, new or {}
            for tool in _keys(old_map, new_map):
                here = (*where, _q(tool))
                if tool not in old_map or old_map[tool] is None:
                    out.append(Change(here, key, "added"))
                elif tool not in new_map or new_map[tool] is None:
                    out.append(Change(here, key, "removed"))
                else:
                    out.extend(_leaf(here, "", old_map[tool], new_map[tool]))
        else:
            out.extend(_leaf(where, key, old, new))
    return out


def _agent(name: str, before: Any, after: Any) -> list[Change]:
    where = (_q(name),)
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return _leaf(where, "", before, after)
    out: list[Change] = []
    for key in _keys(before, after):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key != "tools" or not isinstance(old, list | None) or not isinstance(new, list | None):
            out.extend(_leaf(where, key, old, new))
            continue
        old_c, new_c = _connections(old), _connections(new)
        for conn in _keys(old_c, new_c):
            here = (*where, f"connection {_q(conn)}")
            if conn not in old_c:
                out.append(Change(here, "", "added"))
            elif conn not in new_c:
                out.append(Change(here, "", "removed"))
            elif isinstance(old_c[conn], Mapping) and isinstance(new_c[conn], Mapping):
                out.extend(_connection(here, old_c[conn], new_c[conn]))
            else:
                out.extend(_leaf(here, "", old_c[conn], new_c[conn]))
    return out


def _traits(agent: Any) -> dict[tuple[str, str], Any]:
    tools = agent.get("tools") if isinstance(agent, Mapping) else None
    out: dict[tuple[str, str], Any] = {}
    for conn, block in _connections(tools).items():
        traits = block.get("tool_traits") if isinstance(block, Mapping) else None
        if isinstance(traits, Mapping):
            for tool, trait in traits.items():
                out[(conn, str(tool))] = trait
    return out


def changes(
    before: Any, after: Any, *, version: Any = None, version_number: int | None = None
) -> list[Change]:
    """How the redacted owned subtree ``after`` differs from ``before`` (the baseline). With
    ``version`` (the redacted subtree of the version in force): an agent whose ``tools`` list was
    written whole over the version's traits is said once ("the tools of `main` were replaced")."""
    out: list[Change] = []
    before_map = before if isinstance(before, Mapping) else {}
    after_map = after if isinstance(after, Mapping) else {}
    for key in _keys(before_map, after_map):
        old, new = before_map.get(key), after_map.get(key)
        if old == new:
            continue
        if (
            key != "agents"
            or not isinstance(old, Mapping | None)
            or not isinstance(new, Mapping | None)
        ):
            out.extend(_leaf((), key, old, new))
            continue
        old_a, new_a = old or {}, new or {}
        for name in _keys(old_a, new_a):
            a, b = old_a.get(name), new_a.get(name)
            if a == b:
                continue
            if a is None:
                out.append(Change((_q(name),), "", "added", noun="agent"))
                continue
            if b is None:
                out.append(Change((_q(name),), "", "removed", noun="agent"))
                continue
            listed = _agent(name, a, b)
            gone = _gone(version, name, b)
            changed_conns = {c.where[1] for c in listed if len(c.where) > 1}
            if len(gone) >= 2 or (gone and len(changed_conns) >= 2):
                of = f" of version {version_number}" if version_number is not None else ""
                verb = "is" if len(gone) == 1 else "are"
                plural = "" if len(gone) == 1 else "s"
                note = (
                    f"the tools of {_q(name)} were replaced: {len(gone)} trait{plural}{of} "
                    f"{verb} gone"
                )
                out.append(Change((_q(name),), note, "note"))
            out.extend(listed)
    return out


def _gone(version: Any, agent: str, now: Any) -> list[tuple[str, str]]:
    """The version's traits of ``agent`` that ``now`` no longer holds as the version has them."""
    agents = version.get("agents") if isinstance(version, Mapping) else None
    if not isinstance(agents, Mapping) or not isinstance(agents.get(agent), Mapping):
        return []
    held = _traits(now)
    return [k for k, trait in _traits(agents[agent]).items() if held.get(k) != trait]


def lines(found: list[Change], limit: int = MAX_LINES) -> list[str]:
    """At most ``limit`` lines, then "and N more"."""
    out = [c.text for c in found[:limit]]
    if len(found) > limit:
        out.append(f"and {len(found) - limit} more")
    return out
