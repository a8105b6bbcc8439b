"""The dry-run: what the runtime would do with one round (the CLI ``traitdeck dry-run`` and the web
playground print the same JSON).

A round spec holds one or more attempts: re-streams of the SAME round (same turn and iteration),
as a provider retry produces them. One ledger persists across the attempts, so an early call that
started in attempt 1 is a dedup in attempt 2 (§2.5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from policy.domain.backstop import (
    backstop,
    explain_code,
    multi_action_enabled,
    suppressed_final_answer,
    validate_decision,
    validate_protocol,
)
from policy.domain.jsonable import json_kind
from policy.domain.ledger import Ledger, fingerprint
from policy.domain.overseer import Action, Overseer, effective_cap, explain
from policy.domain.round_policy import RoundPolicy
from policy.domain.traits import EXPLOITATION, UNKNOWN, is_early, normalize_strategy


class RoundSpecError(ValueError):
    """A round spec that cannot be run; the message is one sentence naming the bad field."""


@dataclass(frozen=True)
class RoundSpec:
    turn_id: str
    iteration: int
    max_actions: int | None
    attempts: tuple[tuple[Action, ...], ...]
    multi_action_mode: str | None = None


def _is_int(value: Any) -> TypeGuard[int]:
    # JSON true/false arrive as bool, which Python counts as int: a round number is never a bool.
    return isinstance(value, int) and not isinstance(value, bool)


def parse_round_spec(data: Any) -> RoundSpec:
    """Check a decoded JSON round and build its spec; ``RoundSpecError`` names the bad field.

    Accepted shapes: ``{"turn_id", "iteration", "max_actions"?, "attempts": [[action, …], …]}`` or
    the same with ``"actions": [action, …]`` (one attempt).
    """
    if not isinstance(data, Mapping):
        raise RoundSpecError(f"the round must be a JSON object, not {json_kind(data)}")
    turn_id = data.get("turn_id")
    if not isinstance(turn_id, str) or not turn_id.strip():
        raise RoundSpecError("turn_id must be a non-empty string")
    iteration = data.get("iteration")
    if not _is_int(iteration) or iteration < 0:
        got = iteration if _is_int(iteration) else json_kind(iteration)
        raise RoundSpecError(f"iteration must be an integer of 0 or more, not {got}")
    max_actions = data.get("max_actions")
    if max_actions is not None and not _is_int(max_actions):
        raise RoundSpecError(f"max_actions must be an integer, not {json_kind(max_actions)}")
    has_attempts, has_actions = "attempts" in data, "actions" in data
    if has_attempts == has_actions:
        raise RoundSpecError(
            "give either attempts (a list of attempts) or actions (one attempt), not both"
            if has_attempts
            else "the round needs attempts (a list of attempts) or actions (one attempt)"
        )
    if has_actions:
        raw_attempts: Any = [data["actions"]]
        names = ["actions"]
    else:
        raw_attempts = data["attempts"]
        if not isinstance(raw_attempts, list):
            raise RoundSpecError(
                f"attempts must be a list of attempts, not {json_kind(raw_attempts)}"
            )
        if not raw_attempts:
            raise RoundSpecError("attempts must hold at least one attempt")
        names = [f"attempts[{n}]" for n in range(len(raw_attempts))]
    attempts = tuple(
        _parse_attempt(raw, name) for raw, name in zip(raw_attempts, names, strict=True)
    )
    mode = data.get("multi_action_mode")
    if mode is not None and not isinstance(mode, str):
        raise RoundSpecError(f"multi_action_mode must be a string, not {json_kind(mode)}")
    return RoundSpec(turn_id.strip(), iteration, max_actions, attempts, mode)


def _parse_attempt(raw: Any, name: str) -> tuple[Action, ...]:
    if not isinstance(raw, list):
        raise RoundSpecError(f"{name} must be a list of actions, not {json_kind(raw)}")
    return tuple(_parse_action(item, f"{name}[{index}]") for index, item in enumerate(raw))


def _parse_action(raw: Any, name: str) -> Action:
    if not isinstance(raw, Mapping):
        raise RoundSpecError(f"{name} must be an object, not {json_kind(raw)}")
    action = raw.get("action")
    if not isinstance(action, str):
        raise RoundSpecError(f"{name}.action must be a string, not {json_kind(action)}")
    tool_id = raw.get("tool_id")
    if tool_id is not None and not isinstance(tool_id, str):
        raise RoundSpecError(f"{name}.tool_id must be a string or null, not {json_kind(tool_id)}")
    texts = {}
    for key in ("final_answer", "notes"):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            raise RoundSpecError(f"{name}.{key} must be a string or null, not {json_kind(value)}")
        texts[key] = value
    return Action(
        action,
        tool_id,
        raw.get("params"),
        has_params="params" in raw,
        final_answer=texts["final_answer"],
        notes=texts["notes"],
    )


def resolve_mode(spec: RoundSpec, *candidates: str | None) -> str:
    """The ``multi_action_mode`` a round runs with: the round file's own, else the first given
    candidate (``--multi-action-mode``, the picked profile's, the deployment setting), else
    ``off`` (DESIGN §2.10 item 6). Any string is kept; the runtime reads it with
    :func:`~policy.domain.backstop.multi_action_enabled`."""
    for mode in (spec.multi_action_mode, *candidates):
        if mode is not None:
            return mode
    return "off"


def dry_run(
    spec: RoundSpec, policy: RoundPolicy | AgentResolutionLike, *, multi_action_mode: str = "off"
) -> dict[str, Any]:
    """What the runtime does with the round, stage by stage (DESIGN §2.10 item 5).

    Every attempt re-streams the round into the same decision call: the online overseer and the
    ledger live across attempts. Per streamed action: ``online`` (the overseer while streaming,
    before params arrive; the stream stops at the first rejection, later actions are
    ``not_observed``), early start and ledger (as the action completes), then — after the last
    attempt only — ``backstop`` (multi-action on, more than one action) and execution, where every
    accepted ``call_tool`` is looked up in the ledger. ``verdict``/``code``/``extra`` are the
    final outcome: ``accepted``, ``rejected``, ``not_observed`` or ``dropped`` (accepted while
    streaming, never executed: multi-action off runs only the first action, and a replaced
    stream runs nothing but its early starts).
    """
    round_policy = policy if isinstance(policy, RoundPolicy) else RoundPolicy.of(policy.tools)
    run = _Run(spec, round_policy, multi_action_enabled(multi_action_mode))
    attempts = [run.stream(actions) for actions in spec.attempts]
    for rows in attempts[:-1]:
        for row in rows:
            if row["verdict"] == "accepted":
                _finish(row, "dropped", why=REPLACED)
    run.post_generation(attempts[-1], spec.attempts[-1])
    effective = "on" if run.multi else "off"
    return {
        "turn_id": spec.turn_id,
        "iteration": spec.iteration,
        "max_actions": effective_cap(spec.max_actions),
        "multi_action_mode": effective,
        "attempts": [{"multi_action_mode": effective, "actions": rows} for rows in attempts],
    }


class AgentResolutionLike(Protocol):
    @property
    def tools(self) -> Any: ...


def _stage(
    verdict: str, code: str | None = None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {"verdict": verdict, "code": code, "extra": dict(extra or {})}


REPLACED = (
    "a later attempt re-streamed the round and replaced this stream: only its early starts ran"
)
SINGLE_ONLY = (
    "multi-action mode is off: the runtime executes only the first action of the decision and "
    "drops the rest without a rejection"
)


def _finish(
    row: dict[str, Any],
    verdict: str,
    code: str | None = None,
    extra: Any = None,
    *,
    why: str = "",
) -> None:
    row["verdict"] = verdict
    row.pop("code", None)
    row.pop("extra", None)
    if verdict == "rejected":
        row["code"] = code
        row["extra"] = dict(extra) if extra else None
    row["explanation"] = why or _explain_final(row)


class _Run:
    def __init__(self, spec: RoundSpec, policy: RoundPolicy, multi: bool) -> None:
        self.spec = spec
        self.policy = policy
        self.multi = multi
        self.overseer = Overseer(lambda tool, params: policy.traits(tool, params), spec.max_actions)
        self.ledger = Ledger()
        self.rejected_online = False
        self.completed: dict[int, Action] = {}

    def strategy(self, action: Action) -> list[str]:
        if action.is_final:
            return [EXPLOITATION]
        if action.name != "call_tool" or not action.tool:
            return [UNKNOWN]
        params = action.params if isinstance(action.params, Mapping) else {}
        return sorted(
            set(normalize_strategy(self.policy.traits(action.tool, params).get("strategy")))
        )

    def stream(self, actions: Sequence[Action]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        self.completed = {}
        stopped = False
        for index, action in enumerate(actions):
            row: dict[str, Any] = {
                "index": index,
                "action": action.action,
                "tool_id": None if action.is_final else action.tool_id,
                "strategy": self.strategy(action),
                "online": _stage("not_observed"),
                "backstop": None,
                "verdict": "not_observed",
                "early": False,
                "ledger": None,
                "tool_call_id": None,
            }
            rows.append(row)
            if stopped:
                _finish(row, "not_observed")
                continue
            if action.identified:
                verdict = self.overseer.observe(index, action)
                if not verdict.accepted:
                    self.rejected_online = True
                    row["online"] = _stage("rejected", verdict.code, verdict.extra)
                    _finish(row, "rejected", verdict.code, verdict.extra)
                    row["explanation"] = explain(verdict)
                    stopped = True
                    continue
                row["online"] = _stage("accepted")
                _finish(row, "accepted")
            else:
                _finish(row, "not_observed")
            self.completed[index] = action
            self.complete(index, action, row)
        return rows

    def complete(self, index: int, action: Action, row: dict[str, Any]) -> None:
        """The early listener, as the action's JSON completes."""
        if action.name != "call_tool" or not action.tool:
            return
        spec = self.spec
        found = self.ledger.lookup(spec.turn_id, spec.iteration, index, action.tool, action.params)
        if found is not None:
            record, match = found
            row.update(
                ledger="dedup",
                tool_call_id=record.tool_call_id,
                match=match,
                original_action_index=record.action_index,
            )
            row["fingerprint"] = fingerprint(action.tool, action.params)
            return
        if not any(
            v.index == index and v.action.name == action.name and v.action.tool == action.tool
            for v in self.overseer.accepted
        ):
            return
        params = action.params if isinstance(action.params, Mapping) else {}
        if not is_early(self.policy.traits(action.tool, params)):
            return
        if validate_decision(suppressed_final_answer(action)) is not None:
            return
        if validate_protocol(action, self.policy):
            return
        record = self.ledger.record(spec.turn_id, spec.iteration, index, action.tool, action.params)
        # The dry-run executes nothing: an early call is consumed as soon as it starts.
        self.ledger.finish(record, "consumed")
        row.update(
            early=True,
            ledger="started",
            tool_call_id=record.tool_call_id,
            fingerprint=record.fingerprint,
        )

    def post_generation(self, rows: list[dict[str, Any]], actions: Sequence[Action]) -> None:
        for row in rows:
            if row["verdict"] == "accepted":
                _finish(row, "dropped", why=SINGLE_ONLY)
        if self.rejected_online:
            accepted = [v.index for v in self.overseer.accepted]
            sources = [i for i in accepted if i in self.completed]
            if not sources:
                # Nothing usable was accepted: the runtime retries the decision; nothing runs.
                return
        else:
            sources = sorted(self.completed)
        bundle = [self.completed[i] for i in sources]
        if not bundle:
            return
        if len(bundle) > 1 and self.multi:
            self.bundle(bundle, sources, rows)
            return
        row = rows[sources[0]]
        single = suppressed_final_answer(bundle[0])
        error = validate_decision(single)
        if error:
            _finish(row, "rejected", error)
            return
        _finish(row, "accepted")
        if single.name == "call_tool":
            self.execute(0, single, row)

    def bundle(self, bundle: list[Action], sources: list[int], rows: list[dict[str, Any]]) -> None:
        spec = self.spec
        prevalidated = frozenset(
            position
            for position, action in enumerate(bundle)
            if action.tool
            and self.ledger.lookup(
                spec.turn_id, spec.iteration, position, action.tool, action.params
            )
        )
        result = backstop(
            bundle, self.policy, max_actions=spec.max_actions, prevalidated=prevalidated
        )
        for position, (code, extra) in result.rejected.items():
            row = rows[sources[position]]
            row["backstop"] = _stage("rejected", code, extra)
            _finish(row, "rejected", code, extra)
        for position in range(len(bundle)):
            row = rows[sources[position]]
            if position in result.rejected:
                continue
            if position in result.accepted or position == result.final_index:
                row["backstop"] = _stage("accepted")
                _finish(row, "accepted")
        for position in result.accepted:
            self.execute(
                position, suppressed_final_answer(bundle[position]), rows[sources[position]]
            )

    def execute(self, position: int, action: Action, row: dict[str, Any]) -> None:
        """Post-generation execution: every accepted call is looked up in the ledger first (at
        its bundle position); a record there means it is not run again."""
        if not action.tool:
            return
        spec = self.spec
        found = self.ledger.lookup(
            spec.turn_id, spec.iteration, position, action.tool, action.params
        )
        if found is None:
            return
        record, match = found
        if row["ledger"] != "started":
            row.update(
                ledger="dedup",
                tool_call_id=record.tool_call_id,
                match=match,
                original_action_index=record.action_index,
            )
            row["fingerprint"] = fingerprint(action.tool, action.params)
        elif record.tool_call_id != row["tool_call_id"]:
            # It started early, and its bundle position now points at another call's record.
            row["ledger_reused"] = record.tool_call_id


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
        )
        return f"{head}: rejected {stage} ({item.get('code')}){early}: {item.get('explanation')}"
    if verdict == "accepted":
        return f"{head}: accepted{early}"
    return f"{head}: {verdict}{early}: {item.get('explanation')}"
