"""After generation: the runtime's checks of the decision it received (DESIGN §2.10 items 5, 6).

``validate_decision`` is the per-decision check (``_validate_decision``), ``validate_protocol``
the tool-call check (``_validate_tool_call_protocol``) and ``backstop`` the multi-action bundle
check (``_prepare_safe_multi_action_bundle``), which runs when multi-action mode is on and the
bundle holds more than one action. Codes and extras are the runtime's own strings.

Over 500 lines on purpose: the checks run in the runtime's one order (strategy, then the
cross-action causality checks, then the final answer), and one module keeps that order readable
top to bottom against ``_prepare_safe_multi_action_bundle``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from core.vocabulary import UNKNOWN
from engine.round.overseer import (
    FINAL_ACTIONS,
    FINAL_AFTER_NON_NEUTRAL,
    MIXED_ACTIONS,
    NON_NEUTRAL_AFTER_FINAL,
    STRATEGY_INCOMPATIBLE,
    TOO_MANY_ACTIONS,
    UNSAFE_TOOL,
    Action,
)
from engine.traits.round_policy import RoundPolicy
from engine.traits.traits import compatible_strategies, is_exactly_neutral, normalize_strategy

#: The runtime's code-execution tools: never allowed in a multi-action bundle.
EXEC_TOOLS: Final = frozenset({"exec_tools.execute_code_python"})
SAME_FILE: Final = "multi_action_bundle_same_file_collision"
RENDER_CONSUMES: Final = "multi_action_bundle_render_consumes_same_round_source"
TOOL_CALL_INVALID: Final = "tool_call_invalid"
#: Tools the decision node refuses as a round's single action (its ``exec_only_ids``).
EXEC_ONLY_TOOLS: Final = frozenset({"ctx_tools.fetch_ctx"})
TOOL_NOT_ALLOWED: Final = "tool_not_allowed_in_react"

#: ``react.write`` params must come in this order (the runtime checks the first four keys).
_WRITE_ORDER: Final = (
    ("path", "path_not_first"),
    ("channel", "channel_not_second"),
    ("content", "content_not_third"),
    ("kind", "kind_not_fourth"),
)

MULTI_ACTION_ON: Final = frozenset({"on", "true", "1", "yes", "safe_fanout", "fanout"})

#: Tools whose ``params.path`` is a file the action writes (with every ``rendering_tools.write_*``).
FILE_WRITERS: Final = frozenset({"react.write", "react.patch"})
#: A renderer is recognised by its tool id alone (the runtime's ``startswith``).
RENDERER_PREFIX: Final = "rendering_tools.write_"
#: The runtime's logical conversation-file reference (``CONVERSATION_FILE_REF_PREFIX``) and the
#: namespace markers it rewrites into a physical path, first found only.
CONVERSATION_FILE_REF_PREFIX: Final = "conv:fi:"
_REF_MARKERS: Final = (
    (".files/", "/files/"),
    (".git/projects/", "/git/projects/"),
    (".git/snapshots/", "/git/snapshots/"),
    (".user.attachments/", "/attachments/"),
)


def multi_action_enabled(mode: str | None) -> bool:
    """The runtime's reading of a ``multi_action_mode`` string: on for ``on``, ``true``, ``1``,
    ``yes``, ``safe_fanout``, ``fanout`` (trimmed, any case), off for anything else."""
    return (mode or "").strip().lower() in MULTI_ACTION_ON


def _text(value: Any) -> str:
    return str(value or "").strip()


def suppressed_final_answer(action: Action) -> Action:
    """A ``call_tool`` that also carries a ``final_answer``: the runtime blanks the answer and keeps
    the call (it records ``final_answer_with_tool_call`` as suppressed, not as a rejection)."""
    if action.name == "call_tool" and _text(action.final_answer):
        return Action(
            action.action, action.tool_id, action.params, action.has_params, "", action.notes
        )
    return action


def validate_decision(action: Action) -> str | None:
    """The runtime's ``_validate_decision``: a code string, or ``None`` when the decision is valid.
    (Its salvage of an answer streamed in an earlier round is outside one round's view.)"""
    name = action.name
    if name not in {"call_tool", *FINAL_ACTIONS}:
        return f"invalid_action:{name}"
    final_answer = _text(action.final_answer)
    if name == "call_tool" and final_answer:
        return "final_answer_with_tool_call"
    if name in FINAL_ACTIONS and _tool_call_present(action):
        return "tool_call_with_final_answer"
    if name in FINAL_ACTIONS and not final_answer:
        return "final_answer_required"
    if name in FINAL_ACTIONS and _text(action.notes):
        return "final_answer_with_notes"
    if name != "call_tool":
        return None
    if not action.tool:
        return "missing_tool_id"
    if action.tool == "react.write":
        params = action.params
        if isinstance(params, Mapping) and params:
            keys = list(params.keys())
            for position, (key, code) in enumerate(_WRITE_ORDER):
                if len(keys) > position and keys[position] != key:
                    return code
    return None


def _tool_call_present(action: Action) -> bool:
    # The decision's tool_call object holds tool_id and/or params: non-empty means present.
    return action.tool_id is not None or action.has_params


def validate_protocol(action: Action, policy: RoundPolicy) -> list[dict[str, Any]]:
    """The runtime's tool-call protocol violations (empty list: the call is valid)."""
    violations: list[dict[str, Any]] = []
    params = action.params
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        violations.append({"code": "bad_params", "message": "tool_call.params must be a dict"})
        params = {}
    tool = action.tool
    if not tool:
        violations.append(
            {"code": "missing_tool_id", "message": "tool_call.tool_id is missing or empty"}
        )
    elif not policy.known(tool):
        violations.append(
            {
                "code": "unknown_tool_id",
                "message": f"tool_id '{tool}' is not in adapters/available tools",
                "tool_id": tool,
            }
        )
    if tool in EXEC_TOOLS:
        violations.extend(_exec_contract(params, tool))
    if tool == "react.read" and not (
        isinstance(params.get("paths"), list) or isinstance(params.get("items"), list)
    ):
        violations.append(
            {
                "code": "bad_params",
                "message": "react.read params.paths or params.items must be a list",
                "tool_id": tool,
            }
        )
    return violations


def _exec_contract(params: Mapping[str, Any], tool: str) -> list[dict[str, Any]]:
    contract = params.get("contract")
    if contract is None or contract == []:
        return [
            {
                "code": "missing_contract",
                "message": "exec_tools.execute_code_python requires params.contract",
                "tool_id": tool,
            }
        ]
    if not isinstance(contract, list):
        return [
            {
                "code": "invalid_contract",
                "message": (
                    "exec_tools.execute_code_python params.contract must be a non-empty list of "
                    "{filepath, description, visibility?} objects"
                ),
                "tool_id": tool,
            }
        ]
    return []


def collision_key(raw: Any) -> str:
    """A path or ``ref:`` value as the runtime compares it across a bundle
    (``_bundle_collision_key``): ``ref:`` dropped, a ``conv:fi:`` reference rewritten to its
    ``turn_<id>/<namespace>/<rel>`` path, leading ``/`` dropped, lower-cased; ``""`` when empty."""
    text = str(raw or "").strip()
    if not text:
        return ""
    if text.startswith("ref:"):
        text = text[4:].strip()
    if text.startswith(CONVERSATION_FILE_REF_PREFIX):
        body = text[len(CONVERSATION_FILE_REF_PREFIX) :]
        for marker, replacement in _REF_MARKERS:
            if marker in body:
                body = body.replace(marker, replacement, 1)
                break
        text = body
    return text.lstrip("/").lower()


def _params_dict(action: Action) -> Mapping[str, Any]:
    params = action.params
    return params if type(params) is dict or isinstance(params, Mapping) else {}


def output_paths(action: Action) -> tuple[str, ...]:
    """The files a call writes, as collision keys (``_action_output_paths``): ``params.path`` of
    ``react.write``, ``react.patch`` and every renderer; each ``params.contract[].filename`` of a
    code-execution tool. In contract order — the runtime keeps a set, see :func:`backstop`."""
    tool = action.tool
    if tool in FILE_WRITERS or tool.startswith(RENDERER_PREFIX):
        key = collision_key(_params_dict(action).get("path") or "")
        return (key,) if key else ()
    if tool in EXEC_TOOLS:
        contract = _params_dict(action).get("contract")
        keys: list[str] = []
        for entry in contract if isinstance(contract, list) else ():
            if isinstance(entry, Mapping):
                key = collision_key(entry.get("filename") or "")
                if key and key not in keys:
                    keys.append(key)
        return tuple(keys)
    return ()


def _file_tool(tool: str) -> bool:
    return tool in FILE_WRITERS or tool in EXEC_TOOLS or tool.startswith(RENDERER_PREFIX)


def render_refs(action: Action) -> tuple[str, ...]:
    """The file a renderer reads (``_action_render_refs``): its ``params.content`` when that is a
    string starting with ``ref:`` (no other param, no other tool)."""
    if not action.tool.startswith(RENDERER_PREFIX):
        return ()
    content = _params_dict(action).get("content")
    if isinstance(content, str) and content.startswith("ref:"):
        key = collision_key(content)
        return (key,) if key else ()
    return ()


def causality_rejections(
    bundle: Sequence[Action], accepted: Sequence[int]
) -> dict[int, tuple[str, dict[str, Any]]]:
    """The runtime's cross-action causality checks of the actions still accepted after the
    strategy checks, in its order: (a) the second writer of a file (paths compared as
    :func:`collision_key`) is ``same_file_collision`` with the first writer's position; (b) then
    a renderer not dropped by (a) whose ``ref:`` names a file another accepted action writes —
    earlier or later, dropped by (a) or not; the lowest position wins — is
    ``render_consumes_same_round_source``.

    A code-execution action with several contract files: the runtime walks them in set order
    (string hashes, different in every process), so when two of them collide with different
    writers its pick is not reproducible; Traitdeck walks them in contract order.
    """
    rejected: dict[int, tuple[str, dict[str, Any]]] = {}
    if len(accepted) < 2:
        return rejected
    # Both checks compare two actions that write or render files: fewer than two, nothing to do.
    files = 0
    for index in accepted:
        if _file_tool(bundle[index].tool):
            files += 1
    if files < 2:
        return rejected
    outputs = {index: output_paths(bundle[index]) for index in accepted}
    owner: dict[str, int] = {}
    for index in accepted:
        for path in outputs[index]:
            if path in owner:
                rejected[index] = (SAME_FILE, {"path": path, "first_index": owner[path]})
                break
            owner[path] = index
    for index in accepted:
        if index in rejected:
            continue
        for ref in render_refs(bundle[index]):
            source = next((o for o in accepted if o != index and ref in outputs[o]), None)
            if source is not None:
                rejected[index] = (RENDER_CONSUMES, {"ref": ref, "source_index": source})
                break
    return rejected


def set_order_files(bundle: Sequence[Action], accepted: Sequence[int]) -> tuple[str, ...]:
    """The files whose outcome depends on Python's set order in the runtime (DESIGN §7 "Complete
    exec code"), ``()`` when none: the runtime walks a code-execution call's contract files as a
    set and stops at the first one an earlier action writes. When two or more of them are taken,
    which one it names (and with which first writer) changes from process to process; when one is
    taken, the files it walked before it are claimed by the call, so a later writer of one of
    them may or may not collide with it. :func:`causality_rejections` walks the contract in
    order; these are the files that walk may name differently from the runtime."""
    owner: set[str] = set()
    for position, index in enumerate(accepted):
        paths = output_paths(bundle[index])
        taken = [path for path in paths if path in owner]
        if len(paths) > 1 and taken:
            if len(taken) > 1:
                return tuple(taken)
            free = {path for path in paths if path not in owner}
            later = [
                path
                for other in accepted[position + 1 :]
                for path in output_paths(bundle[other])
                if path in free
            ]
            if later:
                return tuple(dict.fromkeys([*taken, *later]))
        if taken:
            continue  # (rejected there: its paths after the taken one are not claimed)
        owner.update(paths)
    return ()


class Checked(Protocol):
    """One bundle position as the caller checked it already."""

    @property
    def decision_error(self) -> str | None:
        """:func:`validate_decision` of the action (a call's final answer blanked first)."""

    @property
    def protocol_ok(self) -> bool:
        """:func:`validate_protocol` found nothing."""

    @property
    def with_params(self) -> tuple[str, ...]:
        """The strategy with the call's params."""


class BundleVerdicts:
    """The backstop's answer for a bundle: per bundle position, ``None`` (accepted) or the
    rejection ``(code, extra)``; ``error`` when nothing at all survived. (A plain slotted class:
    made once per checked bundle, in the verdicts-only path's hot loop.)"""

    __slots__ = ("accepted", "error", "final_index", "order_dependent", "rejected")

    def __init__(self) -> None:
        #: :func:`set_order_files` of the bundle (only a kept code-execution call has several).
        self.order_dependent: tuple[str, ...] = ()
        self.rejected: dict[int, tuple[str, dict[str, Any]]] = {}
        self.accepted: list[int] = []
        self.final_index: int | None = None
        self.error: str | None = None


def backstop(
    bundle: Sequence[Action],
    policy: RoundPolicy,
    *,
    max_actions: int | None,
    prevalidated: frozenset[int] = frozenset(),
    exec_code_complete: bool = False,
    checked: Sequence[Checked] | None = None,
) -> BundleVerdicts:
    """The runtime's post-generation check of a multi-action bundle (more than one action).

    Unlike the online overseer, the cap counts bundle **positions** (``max_actions or 2``; a
    negative cap rejects everything), a second final answer is ``mixed_actions``, every call is
    validated, and strategies are compared with each call's params (namespace overrides apply).
    ``exec_code_complete`` is the runtime's ``allow_single_exec_with_code`` (the decision's code
    channel streamed complete): the bundle's one code-execution call may then stay (a round
    file's ``exec_code_complete``, true by default: a decision the model finished streaming).
    ``checked``: per position, what the caller already worked out with the same functions (the
    engine's steps), not asked again.
    """
    out = BundleVerdicts()
    cap = int(max_actions or 2)
    accepted: list[int] = []
    final: int | None = None
    single_exec: int | None = None
    if exec_code_complete:
        execs = [i for i, a in enumerate(bundle) if a.name == "call_tool" and a.tool in EXEC_TOOLS]
        single_exec = execs[0] if len(execs) == 1 else None
    # Each rejection: position → (code, extra), in the order made.
    rejected = out.rejected

    for index, raw in enumerate(bundle):
        action = raw
        if index >= cap:
            rejected[index] = (TOO_MANY_ACTIONS, {"index": index, "max_actions": cap})
            continue
        if action.is_final:
            error = (
                checked[index].decision_error if checked is not None else validate_decision(action)
            )
            if error:
                rejected[index] = (error, {})
            elif final is None:
                final = index
            else:
                rejected[index] = (MIXED_ACTIONS, {"action": action.name})
            continue
        if action.name != "call_tool":
            rejected[index] = (MIXED_ACTIONS, {"action": action.name})
            continue
        if checked is not None:
            error = checked[index].decision_error
        else:
            action = suppressed_final_answer(action)
            error = validate_decision(action)
        if error:
            rejected[index] = (error, {})
            continue
        tool = action.tool
        if tool in EXEC_TOOLS and index != single_exec:
            rejected[index] = (UNSAFE_TOOL, {"tool_id": tool})
            continue
        if index not in prevalidated and (checked is None or not checked[index].protocol_ok):
            violations = validate_protocol(action, policy)
            if violations:
                rejected[index] = (
                    TOOL_CALL_INVALID,
                    {"index": index, "tool_id": tool, "violations": violations},
                )
                continue
        accepted.append(index)

    if len(accepted) > 1:
        if checked is not None:  # (what ``_strategy`` reads, without a call per position)
            values = {index: checked[index].with_params for index in accepted}
        else:
            values = {index: _strategy(bundle, policy, None, index) for index in accepted}
        dropped: set[int] | None = None  # (made at the first drop)
        for index in accepted:
            mine = values[index]
            for earlier in accepted:
                if earlier >= index:
                    break  # (positions are accepted in bundle order)
                if dropped is not None and earlier in dropped:
                    continue
                theirs = values[earlier]
                if compatible_strategies(theirs, mine):
                    continue
                if dropped is None:
                    dropped = set()
                dropped.add(index)
                rejected[index] = (
                    STRATEGY_INCOMPATIBLE,
                    {
                        "tool_id": bundle[index].tool,
                        "strategy": sorted(set(mine) or {UNKNOWN}),
                        "first_index": earlier,
                        "first_tool_id": bundle[earlier].tool,
                        "first_strategy": sorted(set(theirs) or {UNKNOWN}),
                    },
                )
                break
        if dropped:
            accepted = [i for i in accepted if i not in dropped]

    causality = causality_rejections(bundle, accepted) if len(accepted) > 1 else None
    if causality and single_exec is not None:
        out.order_dependent = set_order_files(bundle, accepted)
    if causality:  # (rare: most bundles write at most one file)
        out.rejected.update(causality)
        accepted = [i for i in accepted if i not in causality]

    if final is not None:
        if any(i > final for i in accepted):
            dropped = set()
            for index in accepted:
                if index <= final:
                    continue
                mine = _strategy(bundle, policy, checked, index)
                if is_exactly_neutral(mine):
                    continue
                dropped.add(index)
                rejected[index] = (
                    NON_NEUTRAL_AFTER_FINAL,
                    {
                        "tool_id": bundle[index].tool,
                        "strategy": sorted(set(mine) or {UNKNOWN}),
                        "first_index": final,
                        "first_action": bundle[final].name or "complete",
                    },
                )
            accepted = [i for i in accepted if i not in dropped]
        first_non_neutral: int | None = None
        for index in accepted:
            if index <= final and not is_exactly_neutral(_strategy(bundle, policy, checked, index)):
                first_non_neutral = index
                break
        if first_non_neutral is not None:
            rejected[final] = (
                FINAL_AFTER_NON_NEUTRAL,
                {
                    "first_index": first_non_neutral,
                    "first_tool_id": bundle[first_non_neutral].tool,
                    "first_strategy": sorted(
                        set(_strategy(bundle, policy, checked, first_non_neutral)) or {UNKNOWN}
                    ),
                },
            )
        else:
            out.final_index = final
    out.accepted = accepted
    if not accepted and out.final_index is None:
        # The runtime reports its first rejection in the order it made them.
        first = next(iter(out.rejected.values()), None)
        out.error = first[0] if first is not None else "multi_action_bundle_no_valid_actions"
    return out


def _strategy(
    bundle: Sequence[Action], policy: RoundPolicy, checked: Sequence[Checked] | None, index: int
) -> tuple[str, ...]:
    """The strategy the backstop compares for one position: with the call's params."""
    if checked is not None:
        return checked[index].with_params
    action = bundle[index]
    params = action.params if isinstance(action.params, Mapping) else {}
    return normalize_strategy(policy.traits(action.tool, params).get("strategy"))


_WORDS: Final[Mapping[str, str]] = {
    TOO_MANY_ACTIONS: "after generation the bundle holds more actions than the cap allows "
    "(the backstop counts positions, rejected actions included)",
    MIXED_ACTIONS: "after generation: a second final answer, or an action that is not "
    "call_tool / complete / exit",
    UNSAFE_TOOL: "a code-execution tool may not run in a multi-action bundle",
    TOOL_CALL_INVALID: "the tool call is invalid (unknown tool id or malformed params)",
    TOOL_NOT_ALLOWED: "this tool may not be called from the ReAct loop",
    STRATEGY_INCOMPATIBLE: "after generation, with its params, its strategy cannot follow an "
    "earlier accepted action",
    NON_NEUTRAL_AFTER_FINAL: "only exactly neutral calls may follow the final answer",
    FINAL_AFTER_NON_NEUTRAL: "the final answer may only follow exactly neutral calls",
    SAME_FILE: "two actions of the round write the same file",
    RENDER_CONSUMES: "a renderer reads a file written in the same round",
    "final_answer_required": "a final answer (complete/exit) needs a non-empty final_answer",
    "final_answer_with_notes": "a final answer may not carry notes",
    "tool_call_with_final_answer": "a final answer may not carry a tool_call",
    "missing_tool_id": "call_tool without a tool_id",
    "path_not_first": "react.write params must start with path",
    "channel_not_second": "react.write params must have channel second",
    "content_not_third": "react.write params must have content third",
    "kind_not_fourth": "react.write params must have kind fourth",
}


def explain_code(code: str, extra: Mapping[str, Any] | None) -> str:
    """A post-generation rejection in plain words."""
    if code.startswith("invalid_action:"):
        return f"{code.split(':', 1)[1]!r} is not an action the runtime knows"
    text = _WORDS.get(code, f"rejected ({code})")
    fields: Mapping[str, Any] = extra or {}
    if code == SAME_FILE and "path" in fields:
        first = fields.get("first_index")
        text += f": #{first} already writes {fields['path']!r} (paths compare lower-cased)"
    if code == RENDER_CONSUMES and "ref" in fields:
        text += (
            f": it reads {fields['ref']!r}, which #{fields.get('source_index')} writes in this "
            "round (render it in a later round)"
        )
    if code == TOOL_CALL_INVALID and extra:
        reasons = [
            str(v.get("message")) for v in extra.get("violations") or [] if isinstance(v, Mapping)
        ]
        if reasons:
            text += ": " + "; ".join(reasons)
    return text


def single_call_rejection(
    action: Action, policy: RoundPolicy, *, held: bool
) -> tuple[str, dict[str, Any]] | None:
    """The decision node's own checks of a round's single call, after its decision check: a
    tool the ReAct loop may not call, then — unless the ledger holds the call (``held``: it was
    checked when it started early) — the tool-call protocol. ``None``: the call runs."""
    if action.tool in EXEC_ONLY_TOOLS:
        return TOOL_NOT_ALLOWED, {"tool_id": action.tool}
    if held:
        return None
    violations = validate_protocol(action, policy)
    if violations:
        return TOOL_CALL_INVALID, {"violations": violations, "tool_id": action.tool or None}
    return None
