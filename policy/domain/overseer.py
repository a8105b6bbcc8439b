"""The round overseer: which streamed actions of one model decision the runtime keeps (DESIGN §2.3).

The runtime checks every action as soon as it has streamed, in stream order, against the actions it
already accepted in the same round. Traitdeck replays exactly that so the dry-run and the live view
predict the runtime, and explains each rejection in plain words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from policy.domain.traits import (
    EXPLOITATION,
    UNKNOWN,
    compatible,
    is_early_profile,
    is_exactly_neutral,
    resolved_strategy,
)

FINAL_ACTIONS: Final = frozenset({"complete", "exit"})
SUPPORTED_ACTIONS: Final = frozenset({"call_tool", "complete", "exit"})
DEFAULT_MAX_ACTIONS: Final = 2

MIXED_ACTIONS: Final = "multi_action_bundle_mixed_actions"
TOO_MANY_ACTIONS: Final = "multi_action_bundle_too_many_actions"
FINAL_AFTER_NON_NEUTRAL: Final = "multi_action_bundle_final_answer_after_non_neutral"
NON_NEUTRAL_AFTER_FINAL: Final = "multi_action_bundle_non_neutral_after_final_answer"
STRATEGY_INCOMPATIBLE: Final = "multi_action_bundle_strategy_incompatible"

#: Given ``(tool_id, params)``, the tool's resolved raw trait mapping, or ``None`` when the policy
#: does not know the tool. Params are passed because a named-service namespace override depends on
#: ``params.namespace``.
Resolver = Callable[[str, Any], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Action:
    """One streamed action. ``has_params`` is False when the action carried no ``params`` key."""

    action: str
    tool_id: str | None
    params: Any = None
    has_params: bool = False

    @property
    def is_final(self) -> bool:
        return self.action in FINAL_ACTIONS


@dataclass(frozen=True)
class Verdict:
    """What the overseer decided for the action at ``index`` (its position in the stream).

    ``strategy`` keeps the normalized input order; extras carry sorted lists (as the runtime emits).
    """

    index: int
    action: Action
    strategy: tuple[str, ...]
    accepted: bool
    code: str | None
    extra: Mapping[str, Any] | None


def effective_cap(declared: int | None) -> int:
    """The cap the runtime enforces: a declared cap below 1 (or none) means the default, 2."""
    if declared is None or declared < 1:
        return DEFAULT_MAX_ACTIONS
    return declared


def strategy_of(action: Action, resolve: Resolver) -> tuple[str, ...]:
    """The strategy the overseer compares for an action.

    Final answers count as exploitation; an unsupported action, a ``call_tool`` without a tool id
    and a tool the policy does not know are unknown (they can only run alone).
    """
    if action.is_final:
        return (EXPLOITATION,)
    if action.action != "call_tool" or action.tool_id is None:
        return (UNKNOWN,)
    return resolved_strategy(resolve(action.tool_id, action.params))


def oversee(
    actions: Sequence[Action], resolve: Resolver, max_actions: int | None = None
) -> list[Verdict]:
    """Check every action of one round in stream order, exactly as the runtime does (§2.3).

    The first rule that fires rejects the candidate. Rejected actions are dropped: they do not count
    towards the cap and later candidates are not compared against them.
    """
    cap = effective_cap(max_actions)
    accepted: list[Verdict] = []
    verdicts: list[Verdict] = []
    for index, action in enumerate(actions):
        strategy = strategy_of(action, resolve)
        code, extra = _first_rejection(action, strategy, accepted, cap)
        verdict = Verdict(index, action, strategy, code is None, code, extra)
        if verdict.accepted:
            accepted.append(verdict)
        verdicts.append(verdict)
    return verdicts


def _first_rejection(
    action: Action, strategy: tuple[str, ...], accepted: Sequence[Verdict], cap: int
) -> tuple[str | None, dict[str, Any] | None]:
    """Rules 1–6 of §2.3; ``(None, None)`` means accept."""
    # Rule 1 comes before "first action is always accepted": an unsupported action never runs.
    if action.action not in SUPPORTED_ACTIONS:
        return MIXED_ACTIONS, None
    if not accepted:
        return None, None
    if len(accepted) >= cap:
        return TOO_MANY_ACTIONS, {"max_actions": cap}
    if action.is_final:
        for earlier in accepted:
            if not earlier.action.is_final and not is_exactly_neutral(earlier.strategy):
                return FINAL_AFTER_NON_NEUTRAL, _first_fields(earlier)
        # Only neutral bookkeeping (or another final answer) came before: a final may follow.
        return None, None
    for earlier in accepted:
        if earlier.action.is_final:
            if not is_exactly_neutral(strategy):
                return NON_NEUTRAL_AFTER_FINAL, {
                    "first_index": earlier.index,
                    "first_action": earlier.action.action,
                }
            continue
        if not compatible(earlier.strategy, strategy):
            return STRATEGY_INCOMPATIBLE, {"strategy": sorted(strategy), **_first_fields(earlier)}
    return None, None


def _first_fields(earlier: Verdict) -> dict[str, Any]:
    return {
        "first_index": earlier.index,
        "first_tool_id": earlier.action.tool_id,
        "first_strategy": sorted(earlier.strategy),
    }


def is_early_eligible(verdict: Verdict, traits: Mapping[str, Any] | None) -> bool:
    """Whether an accepted call starts while generation continues (§2.4).

    ``traits`` is the tool's resolved raw trait mapping (the resolver's answer). The call must be
    an accepted ``call_tool``, exactly neutral, carry the complete early profile and a parameter
    mapping that was actually given (``{}`` counts, a missing ``params`` does not).
    """
    action = verdict.action
    if not verdict.accepted or action.action != "call_tool" or traits is None:
        return False
    # The verdict's strategy and the traits' strategy come from the same resolution; when a caller
    # hands in traits that disagree, stay on the ordinary path: early start is the risky one.
    if not (is_exactly_neutral(verdict.strategy) and is_exactly_neutral(resolved_strategy(traits))):
        return False
    if not is_early_profile(traits.get("execution")):
        return False
    return action.has_params and isinstance(action.params, Mapping)


def explain(verdict: Verdict) -> str:
    """The verdict in plain words for people (the dry-run, the CLI and the live view show it)."""
    if verdict.accepted:
        return "accepted"
    return explain_rejection(
        str(verdict.code),
        verdict.extra,
        action=verdict.action.action,
        tool_id=verdict.action.tool_id,
        strategy=verdict.strategy,
    )


def explain_rejection(
    code: str,
    extra: Mapping[str, Any] | None,
    *,
    action: str,
    tool_id: str | None,
    strategy: Sequence[str],
) -> str:
    """A rejection in plain words from its data alone (code, extra and the rejected action).

    The live view words an ``action.rejected`` event with it, where no :class:`Verdict` exists.
    ``strategy`` is the candidate's strategy; an empty one (not known to the caller) is left out
    of the wording rather than guessed.
    """
    fields: Mapping[str, Any] = extra or {}
    candidate = _label(Action(action, tool_id))
    if code == MIXED_ACTIONS:
        return (
            f"{candidate} is not a supported action; a round may only hold call_tool, "
            "complete and exit, so it is dropped"
        )
    if code == TOO_MANY_ACTIONS:
        cap = fields.get("max_actions", DEFAULT_MAX_ACTIONS)
        noun = "action" if cap == 1 else "actions"
        return f"the round allows at most {cap} {noun}; {candidate} came after the round was full"
    if code == FINAL_AFTER_NON_NEUTRAL:
        first = _first_label(fields)
        return (
            f"{first} was accepted first; {candidate} may only follow exactly neutral actions "
            "in the same round"
        )
    if code == NON_NEUTRAL_AFTER_FINAL:
        first_action = fields.get("first_action", "complete")
        return (
            f"the final answer ({first_action}) was accepted first; "
            f"{candidate}{_in_parens(strategy)} cannot follow it: only exactly neutral "
            "actions may come after a final answer"
        )
    if code == STRATEGY_INCOMPATIBLE:
        first = _first_label(fields)
        values = fields.get("strategy", sorted(strategy))
        return (
            f"{first} was accepted first; {candidate}{_in_parens(values)} cannot follow it "
            "in the same round"
        )
    return f"rejected ({code})"


def _label(action: Action) -> str:
    if action.is_final:
        return f"the final answer ({action.action})"
    if not action.action:
        # The live view may know a rejection before (or without) the action it rejected.
        return "the action"
    if action.action != "call_tool":
        return repr(action.action)
    return action.tool_id if action.tool_id is not None else "a call_tool without a tool_id"


def _first_label(extra: Mapping[str, Any]) -> str:
    tool_id = extra.get("first_tool_id")
    name = tool_id if isinstance(tool_id, str) else "a call_tool without a tool_id"
    return f"{name} ({_values(extra.get('first_strategy', [UNKNOWN]))})"


def _in_parens(strategy: Any) -> str:
    return f" ({_values(strategy)})" if strategy else ""


def _values(strategy: Any) -> str:
    return ", ".join(str(value) for value in strategy)
