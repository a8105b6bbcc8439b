"""A round as the dry-run reads it: one or more attempts (re-streams of the same round, same turn
and iteration, as a provider retry produces them), each a list of actions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from engine.document.jsonable import json_kind
from engine.round.overseer import Action


class RoundSpecError(ValueError):
    """A round spec that cannot be run; the message is one sentence naming the bad field."""


@dataclass(frozen=True)
class RoundSpec:
    turn_id: str
    iteration: int
    max_actions: int | None
    attempts: tuple[tuple[Action, ...], ...]
    multi_action_mode: str | None = None
    #: ``"v2"`` or ``"v3"``: the react agent the round ran under (issue 37 §0), ``None``: unsaid.
    react_version: str | None = None
    #: Whether the decision's code channel streamed complete (issue 37 §5; the runtime's
    #: ``allow_single_exec_with_code``), ``None``: unsaid (read as true: the model finished).
    exec_code_complete: bool | None = None


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
    version = data.get("react_version")
    if version is not None and (
        not isinstance(version, str) or version.strip().lower() not in ("v2", "v3")
    ):
        shown = repr(version) if isinstance(version, str) else json_kind(version)
        raise RoundSpecError(f'react_version must be "v2" or "v3", not {shown}')
    complete = data.get("exec_code_complete")
    if complete is not None and not isinstance(complete, bool):
        raise RoundSpecError(f"exec_code_complete must be true or false, not {json_kind(complete)}")
    return RoundSpec(
        turn_id.strip(),
        iteration,
        max_actions,
        attempts,
        mode,
        None if version is None else version.strip().lower(),
        complete,
    )


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
