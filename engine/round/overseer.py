"""The round overseer: which streamed actions of one model decision the runtime keeps (DESIGN §2.3).

The runtime checks every action as soon as it has streamed, in stream order, against the actions it
already accepted in the same round. Traitdeck replays exactly that so the dry-run and the live view
predict the runtime, and explains each rejection in plain words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from core.vocabulary import EXPLOITATION, UNKNOWN
from engine.traits.traits import compatible_strategies, is_exactly_neutral, resolved_strategy

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
#: ``params.namespace``; the online overseer passes ``None`` (params have not streamed yet).
Resolver = Callable[[str, Any], Mapping[str, Any] | None]

UNSAFE_TOOL: Final = "multi_action_bundle_unsafe_tool"

#: Each rejection rule in a few words, for pages that list many (the code stays beside them).
RULE_WORDS: Final = {
    MIXED_ACTIONS: "not a supported action (only call_tool, complete and exit)",
    TOO_MANY_ACTIONS: "over the round's action limit",
    FINAL_AFTER_NON_NEUTRAL: "final answer after a non-neutral action",
    NON_NEUTRAL_AFTER_FINAL: "non-neutral action after the final answer",
    STRATEGY_INCOMPATIBLE: "its strategy cannot follow the first action's (e.g. exploitation"
    " after exploration)",
    UNSAFE_TOOL: "a tool that is not safe to run in a bundle",
}


def rule_words(code: str | None) -> str:
    """A rejection code in a few words (the code itself when it is not one the runtime has)."""
    return RULE_WORDS.get(code or "", code or "")


@dataclass(frozen=True, slots=True)
class Action:
    """One streamed action. ``has_params`` is False when the action carried no ``params`` key;
    ``final_answer`` and ``notes`` are the decision's text fields (``None`` when absent).

    ``name``, ``tool``, ``is_final`` and ``identified`` are worked out as the action is made (the
    overseer, the ledger and the backstop read them many times per action); they are not compared.
    (Slotted: a read of a field with a default on a plain dataclass — ``params`` — takes the
    interpreter's slow path, and the engine reads them for every streamed action.)"""

    action: str
    tool_id: str | None
    params: Any = None
    has_params: bool = False
    final_answer: str | None = None
    notes: str | None = None
    #: The action word as the runtime compares it (stripped).
    name: str = field(init=False, repr=False, compare=False)
    #: The tool id as the runtime compares it (stripped, ``""`` when absent).
    tool: str = field(init=False, repr=False, compare=False)
    is_final: bool = field(init=False, repr=False, compare=False)
    #: Whether the runtime's stream parser ever reports this action to the overseer: it does
    #: once the action word (and, for ``call_tool``, the tool id) has streamed.
    identified: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = self.action.strip()
        tool = (self.tool_id or "").strip()
        set_field = object.__setattr__
        set_field(self, "name", name)
        set_field(self, "tool", tool)
        set_field(self, "is_final", name in FINAL_ACTIONS)
        set_field(self, "identified", bool(name) and not (name == "call_tool" and not tool))


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
    """The cap the online overseer enforces: ``max(1, declared or 2)`` — none or 0 means 2, a
    negative value means 1 (measured on the runtime, DESIGN §2.10 item 1)."""
    return max(1, int(declared or DEFAULT_MAX_ACTIONS))


#: :func:`effective_cap` of each declared value seen (one overseer per round; a few values recur).
_CAPS: dict[int | None, int] = {}


def strategy_of(action: Action, resolve: Resolver, params: Any = None) -> tuple[str, ...]:
    """The strategy the overseer compares for an action.

    Final answers count as exploitation; an unsupported action and a tool the policy does not know
    are unknown (they can only run alone).
    """
    if action.is_final:
        return (EXPLOITATION,)
    if action.name != "call_tool" or not action.tool:
        return (UNKNOWN,)
    return resolved_strategy(resolve(action.tool, params))


@dataclass(slots=True)
class Seen:
    """An action as the online overseer compares it: its stream index, stripped action word and
    tool id, whether it is a final answer, its strategy while streaming (no params yet) and
    whether that is exactly neutral (never for a final answer). Not frozen: made for every
    streamed action, and a frozen dataclass is several times slower to build."""

    index: int
    name: str
    tool: str
    final: bool
    strategy: tuple[str, ...]
    neutral: bool


class Rejection(Mapping[str, Any]):
    """A rule's rejection: the runtime's code (``code``) and, as a mapping, its extra fields
    (``extra`` is the rejection itself). The fields are worked out when first read, by
    :func:`_fields`: the verdicts-only path (impact replay, drift, suites) reads only the code."""

    __slots__ = ("_cap", "_fields", "candidate", "code", "earlier")

    def __init__(
        self, code: str, candidate: Seen, earlier: Seen | None = None, cap: int = 0
    ) -> None:
        self.code = code
        #: The rejected action, and the accepted one the rule compared it with (if any).
        self.candidate = candidate
        self.earlier = earlier
        self._cap = cap
        self._fields: dict[str, Any] | None = None

    @property
    def extra(self) -> Mapping[str, Any]:
        return self

    def fields(self) -> dict[str, Any]:
        """A fresh dict of the extra fields (the fast way to copy them)."""
        return dict(self._read())

    def _read(self) -> dict[str, Any]:
        fields = self._fields
        if fields is None:
            fields = self._fields = _fields(self.code, self.candidate, self.earlier, self._cap)
        return fields

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __repr__(self) -> str:
        return f"Rejection({self.code!r}, {self._read()!r})"


def _fields(code: str, candidate: Seen, earlier: Seen | None, cap: int) -> dict[str, Any]:
    """The extra fields the runtime reports with each online rejection (its own keys and order;
    strategies as sorted lists)."""
    index, name = candidate.index, candidate.name
    if code == MIXED_ACTIONS:
        return {"index": index, "action": name}
    if code == TOO_MANY_ACTIONS:
        return {"index": index, "action": name, "tool_id": candidate.tool, "max_actions": cap}
    assert earlier is not None
    if code == FINAL_AFTER_NON_NEUTRAL:
        return {"index": index, "action": name, **_first_fields(earlier)}
    if code == NON_NEUTRAL_AFTER_FINAL:
        return {
            "index": index,
            "tool_id": candidate.tool,
            "strategy": sorted(set(candidate.strategy)),
            "first_index": earlier.index,
            "first_action": earlier.name,
        }
    return {
        "index": index,
        "tool_id": candidate.tool,
        "strategy": sorted(set(candidate.strategy)),
        **_first_fields(earlier),
    }


def seen(index: int, action: Action, strategy: tuple[str, ...]) -> Seen:
    final = action.is_final
    return Seen(
        index,
        action.name,
        action.tool,
        final,
        strategy,
        not final and is_exactly_neutral(strategy),
    )


class Overseer:
    """The runtime's online overseer for one decision call: it judges each action when the stream
    identifies it (before its params arrive), in stream order. It lives for the whole call, so a
    re-stream of the same round (a later attempt) is judged against what earlier attempts had
    accepted, and an index it already accepted is accepted again without a check."""

    __slots__ = ("accepted", "cap", "rejected", "resolve")

    def __init__(self, resolve: Resolver, max_actions: int | None = None) -> None:
        self.resolve = resolve
        cap = _CAPS.get(max_actions)
        if cap is None:
            cap = effective_cap(max_actions)
            if len(_CAPS) < 64:
                _CAPS[max_actions] = cap
        self.cap = cap
        #: What it accepted by stream index, in the order accepted.
        self.accepted: dict[int, Seen] = {}
        #: Whether it rejected anything in this decision call.
        self.rejected = False

    def judge(self, candidate: Seen) -> Rejection | None:
        """The one place the online rules run (DESIGN §2.3 with §2.10), first that fires wins:
        ``None`` accepts (and remembers) the action. An index accepted before passes unchecked.
        (The rules and the bookkeeping are one function: it runs for every streamed action.)"""
        index = candidate.index
        accepted = self.accepted
        if index in accepted:
            return None
        name = candidate.name
        if name not in SUPPORTED_ACTIONS:
            self.rejected = True
            return Rejection(MIXED_ACTIONS, candidate)
        if accepted:
            cap = self.cap
            if len(accepted) >= cap:
                self.rejected = True
                return Rejection(TOO_MANY_ACTIONS, candidate, None, cap)
            if candidate.final:
                for earlier in accepted.values():
                    if not earlier.final and not earlier.neutral:
                        self.rejected = True
                        return Rejection(FINAL_AFTER_NON_NEUTRAL, candidate, earlier)
            else:
                strategy = candidate.strategy
                for earlier in accepted.values():
                    if earlier.final:
                        if not candidate.neutral:
                            self.rejected = True
                            return Rejection(NON_NEUTRAL_AFTER_FINAL, candidate, earlier)
                        continue
                    if not compatible_strategies(earlier.strategy, strategy):
                        self.rejected = True
                        return Rejection(STRATEGY_INCOMPATIBLE, candidate, earlier)
        accepted[index] = candidate
        return None

    def observe(self, index: int, action: Action) -> Verdict:
        strategy = strategy_of(action, self.resolve)
        found = self.judge(seen(index, action, strategy))
        if found is None:
            return Verdict(index, action, strategy, True, None, None)
        return Verdict(index, action, strategy, False, found.code, found.extra)


def oversee(
    actions: Sequence[Action], resolve: Resolver, max_actions: int | None = None
) -> list[Verdict]:
    """Judge one stream of actions as the online overseer does (DESIGN §2.3 with §2.10).

    The stream stops at the first rejection: the returned list ends there (later actions are
    never observed). Actions the stream never identifies (no action word, or ``call_tool``
    without a tool id) are skipped and get no verdict.
    """
    overseer = Overseer(resolve, max_actions)
    verdicts: list[Verdict] = []
    for index, action in enumerate(actions):
        if not action.identified:
            continue
        verdict = overseer.observe(index, action)
        verdicts.append(verdict)
        if not verdict.accepted:
            break
    return verdicts


def _first_fields(earlier: Seen) -> dict[str, Any]:
    return {
        "first_index": earlier.index,
        "first_tool_id": earlier.tool,
        "first_strategy": sorted(set(earlier.strategy)),
    }


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
