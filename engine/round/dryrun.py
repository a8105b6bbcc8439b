"""The dry-run: what the runtime would do with one round (the CLI ``traitdeck dry-run`` and the web
playground print the same JSON).

A round spec holds one or more attempts: re-streams of the SAME round (same turn and iteration),
as a provider retry produces them. One ledger persists across the attempts, so an early call that
started in attempt 1 is a dedup in attempt 2 (§2.5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from engine.round.backstop import EXEC_TOOLS, explain_code, multi_action_enabled
from engine.round.engine import (
    ACCEPTED,
    DROPPED,
    REJECTED,
    REPLACED,
    SCHEMA_ERROR,
    SINGLE_ONLY,
    Row,
    Stage,
    Step,
    run,
)
from engine.round.ledger import RoundLedger, tool_call_id
from engine.round.overseer import Action, Rejection, explain_rejection
from engine.round.react_v2 import MAX_DECISION_RETRIES, V2Decision, run_v2, v2_answer
from engine.round.react_version import version_meaning
from engine.round.round_spec import RoundSpec, RoundSpecError, parse_round_spec
from engine.traits.round_policy import RoundPolicy
from engine.traits.traits import normalize_strategy

__all__ = ["RoundSpec", "RoundSpecError", "describe", "dry_run", "dry_run_v2", "parse_round_spec"]


def dry_run(
    spec: RoundSpec,
    policy: RoundPolicy | AgentResolutionLike,
    *,
    multi_action_mode: str = "off",
    react_version: str = "v3",
    version_source: str | None = None,
    exec_code_complete: bool = True,
) -> dict[str, Any]:
    """What the runtime does with the round, stage by stage (DESIGN §2.10 item 5), in words.

    The outcomes are :func:`engine.round.engine.run`'s — the same the verdicts-only path reads —
    rendered as JSON with an explanation per action. Per streamed action: ``online`` (the
    overseer while streaming, before params arrive; the stream stops at the first rejection,
    later actions are ``not_observed``), early start and ledger (as the action completes), then —
    after the last attempt only — ``backstop`` (multi-action on, more than one action) and
    execution, where every accepted ``call_tool`` is looked up in the ledger.
    ``verdict``/``code``/``extra`` are the final outcome: ``accepted``, ``rejected``,
    ``not_observed`` or ``dropped`` (accepted while streaming, never executed: multi-action off
    runs only the first action, and a replaced stream runs nothing but its early starts).
    ``early`` is true only on the row whose call started while the model was generating.

    ``react_version``: the agent assumed (``v3`` here; the CLI, API and playground pass what the
    precedence of :mod:`engine.round.react_version` gives, KDCube's default ``v2``); under
    ``v2`` each attempt is one answer of the model to a re-asked decision (:func:`dry_run_v2`).

    ``exec_code_complete``: whether the decision's code channel streamed complete (the runtime's
    ``allow_single_exec_with_code``: a bundle's one code-execution call may stay), unless the
    round says (its ``exec_code_complete``); the answer says which it assumed. When a same-file
    collision depends on the runtime's set order (:func:`backstop.set_order_files`) the answer
    is ``"order_dependent": true`` with the info ``runtime-order-dependent`` naming the files.
    """
    round_policy = policy if isinstance(policy, RoundPolicy) else RoundPolicy.of(policy.tools)
    if react_version == "v2":
        return dry_run_v2(spec, round_policy, version_source=version_source)
    result = run(
        spec,
        round_policy,
        multi=multi_action_enabled(multi_action_mode),
        code_complete=exec_code_complete,
    )
    effective = "on" if result.multi else "off"
    order = _order_dependent(result.order_dependent)
    return {
        **order,
        "turn_id": spec.turn_id,
        "iteration": spec.iteration,
        "max_actions": result.cap,
        "multi_action_mode": effective,
        "attempts": [
            {
                "multi_action_mode": effective,
                "actions": [
                    _render(spec, result.ledger, index, action, step, row)
                    for index, (action, step, row) in enumerate(
                        zip(actions, steps, rows, strict=True)
                    )
                ],
            }
            for actions, steps, rows in zip(spec.attempts, result.steps, result.rows, strict=True)
        ],
        "react_version": "v3",
        "react_version_source": version_source,
        "exec_code_complete": result.code_complete,
    }


#: The info a set-order-dependent prediction carries (DESIGN §7 "Complete exec code").
ORDER_DEPENDENT = "runtime-order-dependent"


def _order_dependent(files: tuple[str, ...]) -> dict[str, Any]:
    if not files:
        return {}
    named = ", ".join(files)
    return {
        "order_dependent": True,
        "infos": [
            {
                "code": ORDER_DEPENDENT,
                "files": list(files),
                "message": (
                    f"The runtime walks the code-execution contract's files ({named}) in Python's "
                    "set order, which changes from process to process: which of them it names as "
                    "the collision (and what the call claims before it) is not reproducible. "
                    "Traitdeck walks the contract in order."
                ),
            }
        ],
    }


V2_NOTHING_RUNS = (
    "the v2 agent takes one action per decision: {n} action channels are "
    "multiple_channel_instances:{n}, so nothing of this decision runs"
)
V2_WORDS = {
    "action_schema_error": "the action does not fit v2's action model (a tool_call without "
    "tool_id, or params that are not an object): nothing runs",
    "tool_call_invalid": "the tool is not one v2 knows (the agent's tools and nine react.* "
    "built-ins): nothing runs",
    "tool_signature_red": "the tool subsystem has no such tool: nothing runs",
    "tool_not_allowed_in_react": "ctx_tools.fetch_ctx is only for generated code: nothing runs",
}


def dry_run_v2(
    spec: RoundSpec, policy: RoundPolicy, *, version_source: str | None = None
) -> dict[str, Any]:
    """The round under KDCube's **v2** agent (:mod:`engine.round.react_v2`): each attempt is one
    answer of the model; per attempt the decision (``route``: the tool runs, the model is asked
    again, or the turn exits; the protocol notices; retries spent) and per action its verdict
    (``accepted`` only for the one call that runs or the final answer; ``rejected`` with the
    decision's first notice; ``not_reached`` after the turn ended). No overseer, early start,
    ledger or bundle: ``early`` is always false and ``ledger`` null. The turn is assumed to have
    spent no protocol retry before this round."""
    decisions = run_v2(spec.attempts, frozenset(policy.traits_by_id), iteration=spec.iteration)
    attempts = []
    for number, actions in enumerate(spec.attempts):
        decision = decisions[number] if number < len(decisions) else None
        attempts.append(
            {
                "decision": None if decision is None else v2_answer(decision),
                "actions": [
                    _render_v2(index, action, decision, policy)
                    for index, action in enumerate(actions)
                ],
            }
        )
    return {
        "turn_id": spec.turn_id,
        "iteration": spec.iteration,
        "max_actions": 1,
        "multi_action_mode": "off",
        "attempts": attempts,
        "react_version": "v2",
        "react_version_source": version_source,
        "protocol_retries": MAX_DECISION_RETRIES,
    }


def _render_v2(
    index: int, action: Action, decision: V2Decision | None, policy: RoundPolicy
) -> dict[str, Any]:
    strategy = (
        ()
        if action.is_final
        else normalize_strategy(policy.traits(action.tool, action.params).get("strategy"))
    )
    out: dict[str, Any] = {
        "index": index,
        "action": action.action,
        "tool_id": None if action.is_final else action.tool_id,
        "strategy": _sorted(strategy),
        "online": None,
        "backstop": None,
        "early": False,
        "ledger": None,
        "tool_call_id": None,
    }
    if decision is None:
        out["verdict"] = "not_reached"
        out["explanation"] = "not reached: the turn had already run a tool or ended"
        return out
    if decision.route == "tool_execution" or (decision.route == "exit" and not decision.notices):
        out["verdict"] = ACCEPTED
        out["explanation"] = (
            "accepted: the v2 agent runs it" if decision.runs else "accepted: the turn ends"
        )
        return out
    code = decision.notices[0] if decision.notices else (decision.exit or "")
    out["verdict"] = REJECTED
    out["code"] = code
    out["extra"] = None
    if decision.channel_instances:
        words = V2_NOTHING_RUNS.format(n=decision.channel_instances)
    else:
        words = V2_WORDS.get(code) or explain_code(code, None)
    then = (
        "the model is asked again"
        if decision.route == "decision"
        else f"no protocol retry is left: the turn exits ({decision.exit})"
    )
    out["explanation"] = f"{words}; {then} (v2)"
    return out


class AgentResolutionLike(Protocol):
    @property
    def tools(self) -> Any: ...


REPLACED_WORDS = (
    "a later attempt re-streamed the round and replaced this stream: only its early starts ran"
)
SINGLE_ONLY_WORDS = (
    "multi-action mode is off: an action was rejected while streaming, so the runtime keeps the "
    "accepted ones and executes only the first of them; the rest are dropped without a rejection"
)
_WHY = {REPLACED: REPLACED_WORDS, SINGLE_ONLY: SINGLE_ONLY_WORDS}
OFF_NOTHING_RUNS = (
    "multi-action mode is off and nothing was rejected while streaming: the runtime's channel "
    "streamer reads the decision's action channels as {parser_error}, so nothing of it runs "
    "(an early start has already run) and the model is asked again (action_schema_error)"
)
_NOT_OBSERVED_STAGE: Final[Mapping[str, Any]] = {
    "verdict": "not_observed",
    "code": None,
    "extra": {},
}


def _fields(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """A fresh dict of a stage's extra fields (an online rejection's are worked out here)."""
    if extra is None:
        return {}
    if type(extra) is Rejection:
        return extra.fields()
    return dict(extra)


def _stage(stage: Stage | None) -> dict[str, Any]:
    if stage is None:
        return {"verdict": "not_observed", "code": None, "extra": {}}
    return {"verdict": stage.verdict, "code": stage.code, "extra": _fields(stage.extra)}


_SORTED: dict[tuple[str, ...], list[str]] = {}


def _sorted(strategy: tuple[str, ...]) -> list[str]:
    # A handful of strategies recur in every round: each sorted once (a fresh list per row).
    found = _SORTED.get(strategy)
    if found is None:
        found = sorted(set(strategy))
        if len(_SORTED) < 1024:
            _SORTED[strategy] = found
    return list(found)


def _render(
    spec: RoundSpec, ledger: RoundLedger | None, index: int, action: Action, step: Step, row: Row
) -> dict[str, Any]:
    """One action's row of the dry-run JSON: the engine's outcome, with its words (``ledger``:
    the round's, which holds every row with a ledger record)."""
    online = _stage(row.online)
    out: dict[str, Any] = {
        "index": index,
        "action": action.action,
        "tool_id": None if action.is_final else action.tool_id,
        "strategy": _sorted(step.with_params),
        "online": online,
        "backstop": None if row.backstop is None else _stage(row.backstop),
        "verdict": row.verdict,
    }
    if row.verdict == REJECTED:
        out["code"] = row.code
        out["extra"] = _fields(row.extra) or None
    out["early"] = row.early
    out["ledger"] = row.ledger
    out["tool_call_id"] = (
        tool_call_id(spec.turn_id, spec.iteration, row.record) if row.record >= 0 else None
    )
    if row.ledger == "dedup":
        out["match"] = row.match
        out["original_action_index"] = row.record
    if row.ledger is not None:
        assert ledger is not None
        out["fingerprint"] = ledger.fingerprint(action.tool, action.params)
    if row.reused >= 0:
        out["ledger_reused"] = tool_call_id(spec.turn_id, spec.iteration, row.reused)
    if online["verdict"] == REJECTED:
        out["explanation"] = explain_rejection(
            str(online["code"]),
            online["extra"],
            action=action.action,
            tool_id=action.tool_id,
            strategy=step.strategy,
        )
    elif row.verdict == DROPPED and row.why:
        out["explanation"] = _WHY[row.why]
    elif row.verdict == REJECTED and row.code == SCHEMA_ERROR:
        out["explanation"] = OFF_NOTHING_RUNS.format(
            parser_error=(row.extra or {}).get("parser_error", "multiple_channel_instances")
        )
        if action.is_final and (action.final_answer or "").strip():
            # _keep_and_stop_if_answer_streamed: the answer lane already streamed it.
            out["answer_streamed"] = True
            out["explanation"] += (
                "; but this final answer already streamed to the user, so the turn ends with "
                "it instead of asking again"
            )
    elif row.verdict == ACCEPTED:
        out["explanation"] = "accepted"
    else:
        out["explanation"] = _explain_final(out)
    return out


def _explain_final(row: Mapping[str, Any]) -> str:
    verdict = row["verdict"]
    if verdict == "accepted":
        return "accepted"
    if verdict == "not_observed":
        return (
            "never observed: the stream stopped at an earlier rejection, or never named the action"
        )
    if verdict == "dropped":
        return (
            "accepted while streaming but never executed on the ordinary path (multi-action off "
            "runs only the first action; a replaced stream runs only its early starts)"
        )
    return explain_code(str(row.get("code")), row.get("extra"))


def describe(result: Mapping[str, Any]) -> list[str]:
    """The dry-run result in plain words, one line per action (the CLI's text output)."""
    lines: list[str] = []
    for number, attempt in enumerate(result.get("attempts", []), start=1):
        actions: Sequence[Mapping[str, Any]] = attempt.get("actions", [])
        if not actions:
            lines.append(f"attempt {number}: no actions")
        for item in actions:
            lines.append(f"attempt {number} {_describe_action(item)}")
    version = result.get("react_version")
    if version:
        source = result.get("react_version_source")
        lines.append(
            f"assumed react agent {version}"
            + (f" (from {source})" if source else "")
            + ": "
            + version_meaning(str(version))
        )
    executes = any(
        item.get("tool_id") in EXEC_TOOLS
        for attempt in result.get("attempts", [])
        for item in attempt.get("actions", [])
    )
    if executes and "exec_code_complete" in result:
        lines.append(
            "assumed the code channel "
            + ("streamed complete" if result["exec_code_complete"] else "incomplete")
            + " (exec_code_complete): a bundle's one code-execution call "
            + ("may stay" if result["exec_code_complete"] else "is unsafe_tool")
        )
    for info in result.get("infos", []):
        lines.append(f"info {info['code']}: {info['message']}")
    return lines


def _describe_action(item: Mapping[str, Any]) -> str:
    tool = f" {item['tool_id']}" if item.get("tool_id") is not None else ""
    strategy = ", ".join(item.get("strategy", []))
    head = f"#{item.get('index')} {item.get('action')}{tool} [{strategy}]"
    verdict = item.get("verdict")
    early = ""
    if item.get("ledger") == "started":
        early = f", started early as {item.get('tool_call_id')}"
    elif item.get("ledger") == "dedup":
        early = f", dedup: reuses {item.get('tool_call_id')} (matched by {item.get('match')})"
    if verdict == "rejected":
        stage = (
            "online"
            if (item.get("online") or {}).get("verdict") == "rejected"
            else "after generation"
            if item.get("online") is not None
            else "by the decision node"
        )
        return f"{head}: rejected {stage} ({item.get('code')}){early}: {item.get('explanation')}"
    if verdict == "accepted":
        return f"{head}: accepted{early}"
    return f"{head}: {verdict}{early}: {item.get('explanation')}"
