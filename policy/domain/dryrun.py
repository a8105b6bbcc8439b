"""The dry-run: what the runtime would do with one round (the CLI ``traitdeck dry-run`` and the web
playground print the same JSON).

A round spec holds one or more attempts: re-streams of the SAME round (same turn and iteration),
as a provider retry produces them. One ledger persists across the attempts, so an early call that
started in attempt 1 is a dedup in attempt 2 (§2.5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from policy.domain.jsonable import json_kind
from policy.domain.ledger import Ledger, fingerprint
from policy.domain.overseer import (
    Action,
    Resolver,
    Verdict,
    effective_cap,
    explain,
    is_early_eligible,
    oversee,
)


class RoundSpecError(ValueError):
    """A round spec that cannot be run; the message is one sentence naming the bad field."""


@dataclass(frozen=True)
class RoundSpec:
    turn_id: str
    iteration: int
    max_actions: int | None
    attempts: tuple[tuple[Action, ...], ...]


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
    return RoundSpec(turn_id.strip(), iteration, max_actions, attempts)


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
    return Action(action, tool_id, raw.get("params"), has_params="params" in raw)


def dry_run(spec: RoundSpec, resolve: Resolver) -> dict[str, Any]:
    """Run every attempt of the round through the overseer and one shared ledger.

    Each action says its verdict (code and extra only on rejections), whether it starts early, and
    for early calls the ledger outcome: ``started`` (recorded, then consumed) or ``dedup`` (the
    original record is reused: its ``tool_call_id``, the current call's ``fingerprint``).
    """
    cap = effective_cap(spec.max_actions)
    ledger = Ledger()
    attempts: list[dict[str, Any]] = []
    for actions in spec.attempts:
        verdicts = oversee(actions, resolve, cap)
        attempts.append({"actions": [_entry(spec, v, resolve, ledger) for v in verdicts]})
    return {
        "turn_id": spec.turn_id,
        "iteration": spec.iteration,
        "max_actions": cap,
        "attempts": attempts,
    }


def _entry(spec: RoundSpec, verdict: Verdict, resolve: Resolver, ledger: Ledger) -> dict[str, Any]:
    action = verdict.action
    entry: dict[str, Any] = {
        "index": verdict.index,
        "action": action.action,
        # Final answers name no tool even when the model sent one.
        "tool_id": None if action.is_final else action.tool_id,
        "strategy": sorted(verdict.strategy),
        "verdict": "accepted" if verdict.accepted else "rejected",
        "early": False,
        "explanation": explain(verdict),
    }
    if not verdict.accepted:
        entry["code"] = verdict.code
        entry["extra"] = dict(verdict.extra) if verdict.extra is not None else None
        return entry
    if action.action != "call_tool" or action.tool_id is None:
        return entry
    if not is_early_eligible(verdict, resolve(action.tool_id, action.params)):
        return entry
    entry["early"] = True
    found, match = ledger.claim(
        spec.turn_id, spec.iteration, verdict.index, action.tool_id, action.params
    )
    if match is None:
        # The dry-run does not execute anything: a started call is consumed at once.
        ledger.finish(found, "consumed")
        entry.update(
            tool_call_id=found.tool_call_id, fingerprint=found.fingerprint, ledger="started"
        )
    else:
        entry.update(
            tool_call_id=found.tool_call_id,
            fingerprint=fingerprint(action.tool_id, action.params),
            ledger="dedup",
            match=match,
        )
    return entry


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
    if item.get("verdict") != "accepted":
        return f"{head}: rejected ({item.get('code')}): {item.get('explanation')}"
    if item.get("ledger") == "started":
        return f"{head}: accepted, starts early as {item.get('tool_call_id')}"
    if item.get("ledger") == "dedup":
        return (
            f"{head}: accepted, dedup: reuses {item.get('tool_call_id')} "
            f"(matched by {item.get('match')})"
        )
    return f"{head}: accepted"
