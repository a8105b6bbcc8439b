"""The dry-run's verdicts without its words: per streamed action, only what the runtime does
(verdict, rejection code, early start, ledger dedup), for the bulk users that read nothing else —
the impact replay over a window of recorded rounds, drift checks after every stored batch, and
suites.

:func:`decide` answers exactly what :func:`~policy.domain.dryrun.dry_run` answers for those four
facts (``tests/policy/domain/test_decide.py`` checks it against the full engine on generated
rounds, and ``make test-conformance`` against the runtime's recorded answers). Each tool's trait
questions are answered once per policy; a call whose traits depend on its params (a namespace
override) or whose params the runtime checks (``react.read``, ``react.write``, code execution) is
asked of the policy and of the runtime's own checks (``validate_decision``,
``validate_protocol``); the ledger compares slots, and canonical params only when a record of the
same tool exists. A round holding an action word or tool id the runtime would strip first, a
``call_tool`` without a tool id, or params that are a mapping but not a dict goes through the full
engine, so there is one reading of the runtime's rules for everything unusual.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from policy.domain.backstop import (
    EXEC_TOOLS,
    TOOL_CALL_INVALID,
    causality_rejections,
    multi_action_enabled,
    suppressed_final_answer,
    validate_decision,
    validate_protocol,
)
from policy.domain.dryrun import RoundSpec, dry_run
from policy.domain.overseer import (
    DEFAULT_MAX_ACTIONS,
    FINAL_ACTIONS,
    FINAL_AFTER_NON_NEUTRAL,
    MIXED_ACTIONS,
    NON_NEUTRAL_AFTER_FINAL,
    STRATEGY_INCOMPATIBLE,
    TOO_MANY_ACTIONS,
    UNSAFE_TOOL,
    Action,
)
from policy.domain.round_policy import RoundPolicy
from policy.domain.traits import (
    EXPLOITATION,
    UNKNOWN,
    compatible,
    is_early,
    is_exactly_neutral,
    resolved_strategy,
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """The facts of one predicted action that a policy change can alter."""

    verdict: str
    code: str | None
    early: bool
    dedup: bool

    @property
    def rejected(self) -> bool:
        return self.verdict == "rejected"


#: Per attempt, per streamed action (in stream order): its outcome.
Decision = tuple[tuple[Outcome, ...], ...]

ACCEPTED: Final = "accepted"
REJECTED: Final = "rejected"
NOT_OBSERVED: Final = "not_observed"
DROPPED: Final = "dropped"

# Built-ins whose params the runtime checks (react.read's paths, react.write's key order) and the
# code-execution tools: their calls are asked of the runtime's own checks, never of the facts.
_CHECKED_PARAMS: Final = frozenset({"react.read", "react.write", *EXEC_TOOLS})

_OUTCOMES: dict[tuple[Any, ...], Outcome] = {}
#: A handful of distinct outcomes cover nearly every round; a code can carry an action word
#: (``invalid_action:…``), so what is kept stays bounded.
_MAX_SHARED: Final = 256


def _outcome(row: list[Any]) -> Outcome:
    # Each common outcome is made once and shared.
    key = tuple(row)
    found = _OUTCOMES.get(key)
    if found is None:
        found = Outcome(*row)
        if len(_OUTCOMES) < _MAX_SHARED:
            _OUTCOMES[key] = found
    return found


def outcome_of_row(row: Mapping[str, Any]) -> Outcome:
    """The outcome of one action row of a full dry-run result."""
    return _outcome(
        [row["verdict"], row.get("code"), bool(row.get("early")), row.get("ledger") == "dedup"]
    )


class _Facts:
    """What one policy answers for each tool id, worked out once: ``tool id → (strategy while
    streaming, exactly neutral, starts early, known, plain)``. *Plain*: no namespace overrides
    and no params the runtime checks, so a call's traits and checks do not depend on its params.
    """

    __slots__ = ("policy", "tools")

    def __init__(self, policy: RoundPolicy) -> None:
        self.policy = policy
        self.tools: dict[str, tuple[tuple[str, ...], bool, bool, bool, bool]] = {}

    def of(self, tool: str) -> tuple[tuple[str, ...], bool, bool, bool, bool] | None:
        """The tool's facts; ``None`` for an id the runtime would strip (the full engine's).
        Only the policy's own tools are kept: ids from recorded rounds are unbounded."""
        found = self.tools.get(tool)
        if found is None:
            if not tool or tool != tool.strip():
                return None
            policy = self.policy
            traits = policy.traits(tool)
            strategy = resolved_strategy(traits)
            known = policy.known(tool)
            found = (
                strategy,
                is_exactly_neutral(strategy),
                is_early(traits),
                known,
                tool not in policy.overrides_by_id and tool not in _CHECKED_PARAMS,
            )
            if known:
                self.tools[tool] = found
        return found


_FACTS_ATTRIBUTE: Final = "_decide_facts"


def _facts(policy: RoundPolicy) -> _Facts:
    # A policy is frozen: its facts are worked out as asked and kept on it.
    found = policy.__dict__.get(_FACTS_ATTRIBUTE)
    if found is None:
        found = _Facts(policy)
        object.__setattr__(policy, _FACTS_ATTRIBUTE, found)
    return found


_FINAL_STRATEGY: Final = (EXPLOITATION,)
_UNKNOWN_STRATEGY: Final = (UNKNOWN,)
_COMPATIBLE: dict[tuple[tuple[str, ...], tuple[str, ...]], bool] = {}


def _compatible(earlier: tuple[str, ...], following: tuple[str, ...]) -> bool:
    key = (earlier, following)
    found = _COMPATIBLE.get(key)
    if found is None:
        found = _COMPATIBLE[key] = compatible(earlier, following)
    return found


def _canonical(params: Any) -> str:
    # Two calls of one tool share a ledger fingerprint exactly when these texts are equal
    # (params that are not a mapping count as {}).
    body = params if type(params) is dict else {}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decide(spec: RoundSpec, policy: RoundPolicy, *, multi_action_mode: str = "off") -> Decision:
    """Each streamed action's outcome under ``policy``, as :func:`dry_run` would give it."""
    digested = _digest(spec, _facts(policy))
    if digested is None:
        return _full(spec, policy, multi_action_mode)
    return _Decider(spec.max_actions).run(digested, multi_action_enabled(multi_action_mode))


def handles(spec: RoundSpec, policy: RoundPolicy) -> bool:
    """Whether :func:`decide` answers the round itself (``False``: the full engine does)."""
    return _digest(spec, _facts(policy)) is not None


CALL, FINAL, OTHER = 0, 1, 2
_NO_CALL: Final = Action("", None)

#: One streamed action, digested: (kind, tool, strategy while streaming, exactly neutral while
#: streaming, strategy with its params, exactly neutral with its params, starts early, params,
#: the decision check's code or None, tool-call protocol valid).
_Digest = tuple[int, str, tuple[str, ...], bool, tuple[str, ...], bool, bool, Any, str | None, bool]


def _digest(spec: RoundSpec, facts: _Facts) -> list[list[_Digest]] | None:
    """Each action digested, or ``None`` when one is outside what the fast path answers: an
    action word or tool id the runtime would strip first, a ``call_tool`` without a tool id, or
    params that are a mapping but not a dict."""
    digested: list[list[_Digest]] = []
    tools = facts.tools
    for actions in spec.attempts:
        row: list[_Digest] = []
        for action in actions:
            name = action.action
            if name == "call_tool":
                tool = action.tool_id
                if tool is None:
                    return None
                fact = tools.get(tool) or facts.of(tool)
                if fact is None:
                    return None
                params = action.params
                if fact[4] and (params is None or type(params) is dict):
                    strategy, neutral, early = fact[0], fact[1], fact[2]
                    row.append(
                        (
                            CALL,
                            tool,
                            strategy,
                            neutral,
                            strategy,
                            neutral,
                            early,
                            params,
                            None,
                            fact[3],
                        )
                    )
                    continue
                if params is not None and type(params) is not dict and isinstance(params, Mapping):
                    return None
                # Traits that depend on the params (a namespace override), or params the
                # runtime checks: asked of the policy and the runtime's own checks.
                traits = facts.policy.traits(tool, params if type(params) is dict else {})
                strategy = resolved_strategy(traits)
                row.append(
                    (
                        CALL,
                        tool,
                        fact[0],
                        fact[1],
                        strategy,
                        is_exactly_neutral(strategy),
                        is_early(traits),
                        params,
                        validate_decision(suppressed_final_answer(action)),
                        not validate_protocol(action, facts.policy),
                    )
                )
            elif name in FINAL_ACTIONS:
                row.append(
                    (
                        FINAL,
                        "",
                        _FINAL_STRATEGY,
                        False,
                        _FINAL_STRATEGY,
                        False,
                        False,
                        None,
                        validate_decision(action),
                        True,
                    )
                )
            elif name and name == name.strip():
                row.append(
                    (
                        OTHER,
                        "",
                        _UNKNOWN_STRATEGY,
                        False,
                        _UNKNOWN_STRATEGY,
                        False,
                        False,
                        None,
                        validate_decision(action),
                        True,
                    )
                )
            else:
                return None
        digested.append(row)
    return digested


def _full(spec: RoundSpec, policy: RoundPolicy, multi_action_mode: str) -> Decision:
    result = dry_run(spec, policy, multi_action_mode=multi_action_mode)
    return tuple(
        tuple(outcome_of_row(row) for row in attempt["actions"]) for attempt in result["attempts"]
    )


class _Decider:
    """One round's run: the online overseer and the ledger live across its attempts (the
    dry-run's ``_Run``, reduced to the facts an :class:`Outcome` holds)."""

    __slots__ = (
        "accepted",
        "accepted_at",
        "cap",
        "completed",
        "declared",
        "ledger",
        "rejected_online",
        "texts",
    )

    def __init__(self, max_actions: int | None) -> None:
        self.declared = max_actions
        self.cap = max(1, int(max_actions or DEFAULT_MAX_ACTIONS))
        # The overseer's accepted actions in the order accepted, and by index.
        self.accepted: list[tuple[int, _Digest]] = []
        self.accepted_at: dict[int, _Digest] = {}
        # The ledger: slot (the round's action index) → (tool, params); canonical params text
        # worked out only when a lookup compares it.
        self.ledger: dict[int, tuple[str, Any]] = {}
        self.texts: dict[int, str] = {}
        self.rejected_online = False
        # The last streamed attempt's observed actions, by index.
        self.completed: dict[int, _Digest] = {}

    def run(self, attempts: list[list[_Digest]], multi: bool) -> Decision:
        streamed = [self.stream(actions) for actions in attempts]
        for rows in streamed[:-1]:
            for row in rows:
                if row[0] == ACCEPTED:
                    row[0] = DROPPED
        self.post_generation(streamed[-1], multi)
        return tuple([tuple([_outcome(row) for row in rows]) for rows in streamed])

    def rejection(self, digest: _Digest) -> str | None:
        """The online overseer's rule that rejects the action, first that fires."""
        kind = digest[0]
        if kind == OTHER:
            return MIXED_ACTIONS
        accepted = self.accepted
        if not accepted:
            return None
        if len(accepted) >= self.cap:
            return TOO_MANY_ACTIONS
        if kind == FINAL:
            for _, earlier in accepted:
                if earlier[0] != FINAL and not earlier[3]:
                    return FINAL_AFTER_NON_NEUTRAL
            return None
        strategy, neutral = digest[2], digest[3]
        for _, earlier in accepted:
            if earlier[0] == FINAL:
                if not neutral:
                    return NON_NEUTRAL_AFTER_FINAL
                continue
            if not _compatible(earlier[2], strategy):
                return STRATEGY_INCOMPATIBLE
        return None

    def stream(self, actions: list[_Digest]) -> list[list[Any]]:
        rows: list[list[Any]] = []
        completed: dict[int, _Digest] = {}
        self.completed = completed
        accepted_at = self.accepted_at
        stopped = False
        for index, digest in enumerate(actions):
            if stopped:
                rows.append([NOT_OBSERVED, None, False, False])
                continue
            if index not in accepted_at:
                # (The first action of a round is accepted unless its word is unsupported.)
                code = self.rejection(digest) if self.accepted or digest[0] == OTHER else None
                if code is not None:
                    self.rejected_online = True
                    rows.append([REJECTED, code, False, False])
                    stopped = True
                    continue
                self.accepted.append((index, digest))
                accepted_at[index] = digest
            row = [ACCEPTED, None, False, False]
            rows.append(row)
            completed[index] = digest
            if digest[0] != CALL:
                continue
            # The early listener, as the call's JSON completes.
            tool, params = digest[1], digest[7]
            if self.ledger and self.lookup(index, tool, params):
                row[3] = True
                continue
            first = accepted_at[index]
            if (
                digest[6]  # its traits (with its params) start it early
                and first[0] == CALL
                and first[1] == tool
                and digest[8] is None
                and digest[9]
            ):
                self.ledger[index] = (tool, params)
                row[2] = True
        return rows

    def lookup(self, slot: int, tool: str, params: Any) -> bool:
        """Whether the ledger holds this call: its slot taken by any call, or a call of the
        same tool with the same params at any slot."""
        ledger = self.ledger
        if slot in ledger:
            return True
        text: str | None = None
        for recorded, (recorded_tool, recorded_params) in ledger.items():
            if recorded_tool != tool:
                continue
            if text is None:
                text = _canonical(params)
            known = self.texts.get(recorded)
            if known is None:
                known = self.texts[recorded] = _canonical(recorded_params)
            if known == text:
                return True
        return False

    def post_generation(self, rows: list[list[Any]], multi: bool) -> None:
        for row in rows:
            if row[0] == ACCEPTED:
                row[0] = DROPPED
        completed = self.completed
        if self.rejected_online:
            sources = [index for index, _ in self.accepted if index in completed]
        else:
            sources = sorted(completed)
        if not sources:
            return  # nothing usable was accepted: the runtime retries; nothing runs
        bundle = [completed[i] for i in sources]
        if len(bundle) > 1 and multi:
            self.backstop(bundle, sources, rows)
            return
        row = rows[sources[0]]
        single = bundle[0]
        if single[8] is not None:
            row[0], row[1] = REJECTED, single[8]
            return
        row[0], row[1] = ACCEPTED, None
        if single[0] == CALL:
            self.execute(0, single[1], single[7], row)

    def backstop(self, bundle: list[_Digest], sources: list[int], rows: list[list[Any]]) -> None:
        cap = int(self.declared or 2)
        rejected: dict[int, str] = {}
        accepted: list[int] = []
        final: int | None = None
        for position, digest in enumerate(bundle):
            kind, error = digest[0], digest[8]
            if position >= cap:
                rejected[position] = TOO_MANY_ACTIONS
            elif kind == FINAL:
                if error is not None:
                    rejected[position] = error
                elif final is None:
                    final = position
                else:
                    rejected[position] = MIXED_ACTIONS
            elif kind != CALL:
                rejected[position] = MIXED_ACTIONS
            elif error is not None:
                rejected[position] = error
            elif digest[1] in EXEC_TOOLS:
                rejected[position] = UNSAFE_TOOL
            elif not digest[9] and not self.lookup(position, digest[1], digest[7]):
                # An invalid call the ledger already holds at its position counts as checked.
                rejected[position] = TOOL_CALL_INVALID
            else:
                accepted.append(position)
        if len(accepted) > 1:
            dropped: set[int] = set()
            for place, position in enumerate(accepted):
                mine = bundle[position][4]
                for earlier in accepted[:place]:
                    if earlier in dropped or _compatible(bundle[earlier][4], mine):
                        continue
                    dropped.add(position)
                    rejected[position] = STRATEGY_INCOMPATIBLE
                    break
            accepted = [p for p in accepted if p not in dropped]
        calls = [Action("call_tool", d[1], d[7]) if d[0] == CALL else _NO_CALL for d in bundle]
        for position, (code, _) in causality_rejections(calls, accepted).items():
            rejected[position] = code
            accepted.remove(position)
        final_index: int | None = None
        if final is not None:
            after = {p for p in accepted if p > final and not bundle[p][5]}
            for position in sorted(after):
                rejected[position] = NON_NEUTRAL_AFTER_FINAL
            accepted = [p for p in accepted if p not in after]
            if any(p <= final and not bundle[p][5] for p in accepted):
                rejected[final] = FINAL_AFTER_NON_NEUTRAL
            else:
                final_index = final
        for position, code in rejected.items():
            row = rows[sources[position]]
            row[0], row[1] = REJECTED, code
        for position in accepted:
            row = rows[sources[position]]
            row[0], row[1] = ACCEPTED, None
        if final_index is not None:
            row = rows[sources[final_index]]
            row[0], row[1] = ACCEPTED, None
        for position in accepted:
            digest = bundle[position]
            self.execute(position, digest[1], digest[7], rows[sources[position]])

    def execute(self, position: int, tool: str, params: Any, row: list[Any]) -> None:
        """Post-generation execution: a call the ledger already holds (at its bundle position, or
        by fingerprint) is not run again — a dedup unless it started early itself."""
        if not row[2] and self.ledger and self.lookup(position, tool, params):
            row[3] = True


def outcomes_by_slot(
    spec: RoundSpec, decision: Decision
) -> dict[tuple[int, int], tuple[str | None, Outcome]]:
    """(attempt, action index) → (tool id, outcome), attempts 1-based (the shape
    :func:`policy.domain.impact.outcomes` gives for a full dry-run)."""
    return {
        (number, index): (None if action.is_final else action.tool_id, outcome)
        for number, (actions, outcomes) in enumerate(zip(spec.attempts, decision, strict=True), 1)
        for index, (action, outcome) in enumerate(zip(actions, outcomes, strict=True))
    }


def decide_any(spec: RoundSpec, policy: Any, *, multi_action_mode: str = "off") -> Decision:
    """:func:`decide` for a round policy or anything with ``tools`` (an agent resolution)."""
    if not isinstance(policy, RoundPolicy):
        policy = RoundPolicy.of(policy.tools)
    return decide(spec, policy, multi_action_mode=multi_action_mode)
