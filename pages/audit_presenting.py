"""How the audit page shows an entry: a link to the thing (while it still exists) and what
changed, as a small line diff of the before and after values."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import NoReverseMatch, reverse

from audit.models import AuditEntry
from policy.selectors import DraftState, draft_state

_VERSION_TARGET = re.compile(r"version ([0-9]{1,9})")
#: Past this many diff lines the page shows the first ones and says how many were left out.
DIFF_LINES = 400


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk" or "same"
    text: str


@dataclass(frozen=True)
class EntryView:
    entry: AuditEntry
    url: str | None
    diff: tuple[DiffLine, ...]
    diff_cut: int
    before_json: str
    after_json: str

    @property
    def has_change(self) -> bool:
        return self.entry.before is not None or self.entry.after is not None


def _pretty(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False)


def _lines(value: Any) -> list[str]:
    # A whole policy is easiest to read as its export text; everything else as JSON.
    if isinstance(value, dict) and isinstance(value.get("export"), str):
        rest = {k: v for k, v in value.items() if k != "export"}
        return _pretty(rest).splitlines() + ["--- export ---", *value["export"].splitlines()]
    return _pretty(value).splitlines()


def change_diff(before: Any, after: Any) -> tuple[tuple[DiffLine, ...], int]:
    """A unified diff of the two values (3 lines of context), and how many lines were cut."""
    out: list[DiffLine] = []
    raw = difflib.unified_diff(_lines(before), _lines(after), lineterm="", n=3)
    for line in raw:
        if line.startswith(("---", "+++")) and not out:
            continue
        if line.startswith("@@"):
            out.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            out.append(DiffLine("add", line))
        elif line.startswith("-"):
            out.append(DiffLine("del", line))
        else:
            out.append(DiffLine("same", line))
    cut = max(len(out) - DIFF_LINES, 0)
    return tuple(out[:DIFF_LINES]), cut


def _reverse(name: str, *args: Any, query: dict[str, str] | None = None) -> str | None:
    try:
        url = reverse(name, args=args)
    except NoReverseMatch:
        return None
    return url + ("?" + urlencode(query) if query else "")


def _connection_exists(state: DraftState, agent: str, index: Any) -> bool:
    try:
        tools = state.data["surfaces"]["as_consumer"]["agents"][agent]["tools"]
    except (KeyError, TypeError):
        return False
    return isinstance(index, int) and isinstance(tools, list) and 0 <= index < len(tools)


def entry_url(entry: AuditEntry, state: DraftState) -> str | None:
    """Where the thing the entry names lives now, or ``None`` when it no longer exists."""
    ref = entry.ref if isinstance(entry.ref, dict) else {}
    if isinstance(ref.get("token"), str):
        return _reverse("accounts:tokens")
    version = ref.get("version")
    match = _VERSION_TARGET.fullmatch(entry.target)
    if version is None and match is not None:
        version = int(match.group(1))
    if isinstance(version, int):
        return _reverse("policy:version", version)
    agent = ref.get("agent")
    if not isinstance(agent, str) or agent not in state.agents:
        return None
    index = ref.get("connection")
    if index is not None and _connection_exists(state, agent, index):
        key = ref.get("key")
        if isinstance(key, str):
            namespace = ref.get("namespace")
            query = {"namespace": namespace} if isinstance(namespace, str) else None
            return _reverse("policy:tool-edit", agent, index, key, query=query)
        return _reverse("policy:connection-edit", agent, index)
    return _reverse("policy:agent", agent)


def entry_views(entries: Iterable[AuditEntry]) -> list[EntryView]:
    state = draft_state()
    views = []
    for entry in entries:
        diff, cut = change_diff(entry.before, entry.after)
        views.append(
            EntryView(
                entry=entry,
                url=entry_url(entry, state),
                diff=diff,
                diff_cut=cut,
                before_json=_pretty(entry.before),
                after_json=_pretty(entry.after),
            )
        )
    return views
