"""What changed between two policies: the unified diff of their exports, and a per-tool summary
in words ("web_tools.web_search: strategy exploration → neutral; early start on")."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.tools.resolution import EffectiveTool, agent_names, resolve_agent
from policy.domain.yaml_io import export_text


@dataclass(frozen=True)
class DiffLine:
    """One line of the unified diff: ``kind`` is ``add``, ``remove``, ``hunk``, ``file`` or
    ``same`` (the template colours by kind)."""

    kind: str
    text: str


#: The whole file as context: the page folds the unchanged runs itself (with "show more").
WHOLE_FILE = 1_000_000


def unified_diff(
    old: Any, new: Any, *, old_label: str, new_label: str, context: int = 3
) -> list[DiffLine]:
    """The unified diff of the two policies' exports (empty when they export the same bytes)."""
    return text_diff(
        export_text(old),
        export_text(new),
        old_label=old_label,
        new_label=new_label,
        context=context,
    )


def text_diff(
    old: str, new: str, *, old_label: str, new_label: str, context: int = 3
) -> list[DiffLine]:
    """The unified diff of two texts, each line with its kind."""
    lines = difflib.unified_diff(
        old.splitlines(),
        new.splitlines(),
        fromfile=old_label,
        tofile=new_label,
        lineterm="",
        n=context,
    )
    out = []
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "remove"
        else:
            kind = "same"
        out.append(DiffLine(kind, line))
    return out


@dataclass(frozen=True)
class DiffRun:
    """Consecutive lines of a diff as a page shows them: ``folded`` runs are unchanged lines
    far from any change, hidden behind "show more"."""

    folded: bool
    lines: tuple[DiffLine, ...]


def fold(lines: list[DiffLine], *, context: int = 3, at_least: int = 4) -> list[DiffRun]:
    """Group ``lines`` into runs, folding unchanged lines more than ``context`` lines away from a
    change (a fold of fewer than ``at_least`` lines is not worth a click: it stays shown)."""
    changed = [i for i, line in enumerate(lines) if line.kind in ("add", "remove")]
    near: set[int] = set()
    for i in changed:
        near.update(range(max(0, i - context), min(len(lines), i + context + 1)))
    hide = [line.kind == "same" and i not in near for i, line in enumerate(lines)]
    runs: list[DiffRun] = []
    start = 0
    for i in range(1, len(lines) + 1):
        if i == len(lines) or hide[i] != hide[start]:
            chunk = tuple(lines[start:i])
            runs.append(DiffRun(folded=hide[start] and len(chunk) >= at_least, lines=chunk))
            start = i
    merged: list[DiffRun] = []
    for run in runs:  # a short fold that stays shown joins its neighbours
        if merged and not run.folded and not merged[-1].folded:
            merged[-1] = DiffRun(False, merged[-1].lines + run.lines)
        else:
            merged.append(run)
    return merged


def _values(strategy: tuple[str, ...]) -> str:
    return ", ".join(strategy)


def _tool_words(old: EffectiveTool | None, new: EffectiveTool | None) -> list[str]:
    if old is None:
        if new is None:
            return []
        return [f"added (strategy {_values(new.strategy)}{', early start' if new.early else ''})"]
    if new is None:
        return ["removed"]
    words: list[str] = []
    if old.strategy != new.strategy:
        words.append(f"strategy {_values(old.strategy)} → {_values(new.strategy)}")
    if old.early != new.early:
        words.append("early start on" if new.early else "early start off")
    old_keys = {k: v for k, v in old.normalized_traits.items() if k not in ("strategy",)}
    new_keys = {k: v for k, v in new.normalized_traits.items() if k not in ("strategy",)}
    for key in sorted(set(old_keys) | set(new_keys), key=str):
        if key == "execution" and old.early != new.early:
            continue
        if old_keys.get(key) != new_keys.get(key):
            words.append(f"{key} changed")
    if dict(old.normalized_overrides) != dict(new.normalized_overrides):
        words.append("namespace overrides changed")
    if dict(old.execution_design) != dict(new.execution_design):
        words.append("execution design changed")
    return words


def _tools(data: Any, agent: str) -> Mapping[str, EffectiveTool]:
    if agent not in agent_names(data):
        return {}
    return {t.tool_id: t for t in resolve_agent(data, agent).tools if not t.builtin}


def tool_changes(old: Any, new: Any) -> list[str]:
    """One line per changed tool (and per added or removed agent), in agent then tool order."""
    lines: list[str] = []
    old_agents, new_agents = agent_names(old), agent_names(new)
    for agent in [*old_agents, *(a for a in new_agents if a not in old_agents)]:
        if agent not in new_agents:
            lines.append(f"agent {agent}: removed")
            continue
        if agent not in old_agents:
            lines.append(f"agent {agent}: added")
        before, after = _tools(old, agent), _tools(new, agent)
        for tool_id in [*before, *(t for t in after if t not in before)]:
            words = _tool_words(before.get(tool_id), after.get(tool_id))
            if words:
                lines.append(f"{agent} · {tool_id}: {'; '.join(words)}")
    return lines
