"""The one engine: what the runtime does with one round, stage by stage (DESIGN §2.3–2.5, §2.10).

Every attempt re-streams the round into the same decision call, so the online overseer and the
ledger live across attempts. Per streamed action: the overseer's verdict while streaming (before
params arrive; the stream stops at the first rejection), the early listener and the ledger as the
action completes; after the last attempt only, the backstop (multi-action on, more than one
action) and execution, where every accepted ``call_tool`` is looked up in the ledger at its bundle
position.

:func:`run` answers with one :class:`Row` per streamed action. The verdicts-only path
(:mod:`engine.round.decide`: impact replay, drift, suites) reads four facts of each row; the
dry-run (:mod:`engine.round.dryrun`: CLI, API, playground) renders every field of it with its
explanation. Each rule of the runtime is called here from the one function that holds it:

- the online overseer's rules and cap: :meth:`engine.round.overseer.Overseer.judge`;
- early eligibility: :func:`starts_early`;
- the ledger's lookup and record: :class:`engine.round.ledger.RoundLedger`; what a dedup makes of
  a row: :meth:`Row.reuse`;
- the post-generation checks: :func:`engine.round.backstop.backstop` and
  :func:`engine.round.backstop.validate_decision`.

Each tool's trait questions are answered once per policy (:class:`_Facts`), and a call whose
params change nothing (no namespace override, no params the runtime checks) has one step per
stream index, kept with them; a call whose traits depend on its params or whose params the
runtime checks is asked of the policy and the runtime's checks with its params. The verdicts-only
path runs this engine for every recorded round of an impact window and every stored batch, so it
makes as few objects per streamed action as it can: the run itself is the answer
(:class:`EngineRun`), and a row holds only what differs from its class's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from core.vocabulary import EXPLOITATION, UNKNOWN
from engine.round.backstop import (
    EXEC_ONLY_TOOLS,
    EXEC_TOOLS,
    backstop,
    single_call_rejection,
    suppressed_final_answer,
    validate_decision,
    validate_protocol,
)
from engine.round.ledger import LedgerHit, RoundLedger
from engine.round.overseer import FINAL_ACTIONS, Action, Overseer, Resolver, Seen
from engine.round.round_spec import RoundSpec
from engine.traits.round_policy import RoundPolicy
from engine.traits.traits import is_early, is_exactly_neutral, resolved_strategy

ACCEPTED: Final = "accepted"
REJECTED: Final = "rejected"
NOT_OBSERVED: Final = "not_observed"
DROPPED: Final = "dropped"

#: Why an action accepted while streaming was dropped (the dry-run words each).
REPLACED: Final = "replaced"
SINGLE_ONLY: Final = "single_only"
#: The decision node's code for a decision its channel streamer could not read as one action.
SCHEMA_ERROR: Final = "action_schema_error"

# Built-ins whose params the runtime checks (react.read's paths, react.write's key order) and the
# code-execution tools: their calls are always asked of the runtime's own checks.
_CHECKED_PARAMS: Final = frozenset({"react.read", "react.write", *EXEC_TOOLS})
_FINAL_STRATEGY: Final = (EXPLOITATION,)
_UNKNOWN_STRATEGY: Final = (UNKNOWN,)


class Stage:
    """One stage's verdict on an action (online, backstop). (A plain slotted class: cheaper to
    make than a named tuple, and one is made for every rejection.)"""

    __slots__ = ("code", "extra", "verdict")

    def __init__(
        self, verdict: str, code: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        self.verdict = verdict
        self.code = code
        self.extra = extra


_ONLINE_ACCEPTED: Final = Stage(ACCEPTED)
_NONE: Final[frozenset[int]] = frozenset()
_BACKSTOP_ACCEPTED: Final = Stage(ACCEPTED)


@dataclass(slots=True)
class Step(Seen):
    """One streamed action as the rules read it, worked out once. As a :class:`Seen` it is what
    the online overseer compares (``strategy``: while streaming, without params). It holds no
    part of the action itself: a call whose params change nothing (see :class:`_ToolFacts`) has
    the same step in every round at the same index, made once per policy."""

    #: The stream reports it to the overseer (an action word, and a tool id for ``call_tool``).
    identified: bool
    #: ``call_tool`` with a tool id (the only actions the ledger and execution look at).
    call: bool
    #: The strategy with the call's params (a namespace override applies), input order.
    with_params: tuple[str, ...]
    #: Its traits with its params make a call start early.
    early_traits: bool
    #: The runtime's ``_validate_decision`` code (after blanking a tool call's final answer).
    decision_error: str | None
    #: The runtime's tool-call protocol check passes.
    protocol_ok: bool


class Row:
    """What the round did with one streamed action. (Slotted, every field set as it is made:
    attribute reads and writes of such a class are the interpreter's fastest, and a row is made
    and read for every streamed action.)"""

    __slots__ = (
        "backstop", "code", "early", "extra", "ledger", "match", "online", "record", "reused",
        "verdict", "why",
    )  # fmt: skip

    def __init__(self) -> None:
        self.verdict: str = NOT_OBSERVED
        self.code: str | None = None
        self.extra: Mapping[str, Any] | None = None
        self.online: Stage | None = None
        self.backstop: Stage | None = None
        self.early = False
        #: ``"started"`` (it started early), ``"dedup"`` (the ledger held it) or ``None``.
        self.ledger: str | None = None
        #: The action index of the ledger record it started or reused (-1: none).
        self.record = -1
        self.match: str | None = None
        #: Started early, but its bundle position now points at this other record (-1: none).
        self.reused = -1
        #: Why an action accepted while streaming was dropped (``REPLACED``, ``SINGLE_ONLY``).
        self.why = ""

    def finish(self, verdict: str, code: str | None = None, extra: Any = None) -> None:
        self.verdict, self.code, self.extra, self.why = verdict, code, extra, ""

    def reuse(self, hit: LedgerHit) -> None:
        """The ledger holds this call: it is not run, the record it matched is reused."""
        self.ledger, self.record, self.match = "dedup", hit.index, hit.match


def starts_early(step: Step, accepted_as: Seen | None) -> bool:
    """Whether a completed call starts while the model is still generating (§2.4, §2.10 item 2):
    the overseer accepted an action at its index with the same word and tool, its traits with its
    params are exactly neutral with the complete early profile, and it passes the runtime's
    decision and protocol checks (missing or ``null`` params count as ``{}``; a non-mapping value
    fails the protocol check). The ledger is asked first: a call it holds is a dedup instead."""
    return (
        step.early_traits
        and accepted_as is not None
        and accepted_as.name == "call_tool"
        and accepted_as.tool == step.tool
        and step.decision_error is None
        and step.protocol_ok
    )


class _Facts:
    """What one policy answers for each of its tool ids, worked out once."""

    __slots__ = ("policy", "resolve", "tools")

    def __init__(self, policy: RoundPolicy) -> None:
        self.policy = policy
        #: The policy's resolver, as the overseer takes it (one bound method per policy).
        self.resolve: Resolver = policy.traits
        self.tools: dict[str, _ToolFacts] = {}

    def of(self, tool: str) -> _ToolFacts:
        found = self.tools.get(tool)
        if found is None:
            policy = self.policy
            traits = policy.traits(tool)
            strategy = resolved_strategy(traits)
            known = policy.known(tool)
            found = _ToolFacts(
                strategy,
                is_exactly_neutral(strategy),
                is_early(traits),
                known,
                tool not in policy.overrides_by_id and tool not in _CHECKED_PARAMS,
                {},
            )
            # Only the policy's own tools are kept: ids from recorded rounds are unbounded.
            if known:
                self.tools[tool] = found
        return found


@dataclass(frozen=True, slots=True)
class _ToolFacts:
    #: The strategy while streaming (no params), and whether it is exactly neutral.
    strategy: tuple[str, ...]
    neutral: bool
    early: bool
    known: bool
    #: No namespace overrides and no params the runtime checks: its params change nothing.
    plain: bool
    #: A plain call's step by stream index (a step holds nothing of the action: the same at the
    #: same index in every round the policy runs).
    steps: dict[int, Step]


#: Plain steps are kept for the first stream indexes only (a recorded round may be long).
_KEPT_INDEXES: Final = 32
_FACTS_ATTRIBUTE: Final = "_engine_facts"


def _facts(policy: RoundPolicy) -> _Facts:
    # A policy is frozen: its facts are worked out as asked and kept on it.
    found = policy.__dict__.get(_FACTS_ATTRIBUTE)
    if found is None:
        found = _Facts(policy)
        object.__setattr__(policy, _FACTS_ATTRIBUTE, found)
    return found


def _step(index: int, action: Action, facts: _Facts) -> Step:
    name = action.name
    if name == "call_tool":
        tool = action.tool
        if not tool:
            return Step(
                index, name, "", False, _UNKNOWN_STRATEGY, False,
                False, False, _UNKNOWN_STRATEGY, False, "missing_tool_id", False,
            )  # fmt: skip
        fact = facts.tools.get(tool) or facts.of(tool)
        params = action.params
        if fact.plain and (params is None or type(params) is dict):
            found = fact.steps.get(index)
            if found is None:
                found = Step(
                    index, name, tool, False, fact.strategy, fact.neutral,
                    True, True, fact.strategy, fact.early, None, fact.known,
                )  # fmt: skip
                if index < _KEPT_INDEXES:
                    fact.steps[index] = found
            return found
        policy = facts.policy
        traits = policy.traits(tool, params if _is_mapping(params) else {})
        return Step(
            index, name, tool, False, fact.strategy, fact.neutral,
            True, True, resolved_strategy(traits), is_early(traits),
            validate_decision(suppressed_final_answer(action)),
            not validate_protocol(action, policy),
        )  # fmt: skip
    if name in FINAL_ACTIONS:
        return Step(
            index, name, action.tool, True, _FINAL_STRATEGY, False,
            True, False, _FINAL_STRATEGY, False, validate_decision(action), True,
        )  # fmt: skip
    return Step(
        index, name, action.tool, False, _UNKNOWN_STRATEGY, False,
        bool(name), False, _UNKNOWN_STRATEGY, False, validate_decision(action), True,
    )  # fmt: skip


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def run(spec: RoundSpec, policy: RoundPolicy, multi: bool, code_complete: bool = True) -> EngineRun:
    """What the runtime does with the round (see the module docstring). ``code_complete``: the
    decision's code channel streamed complete (``allow_single_exec_with_code``) when the round
    does not say (its ``exec_code_complete``)."""
    facts = policy.__dict__.get(_FACTS_ATTRIBUTE) or _facts(policy)
    result = EngineRun(facts.resolve, spec.max_actions)
    result.spec, result.policy, result.multi = spec, policy, multi
    result.code_complete = (
        code_complete if spec.exec_code_complete is None else spec.exec_code_complete
    )
    result.order_dependent = ()
    result.steps, result.rows, result.ledger = [], [], None
    for actions in spec.attempts:
        result.stream(actions, facts)
    result.post_generation()
    return result


class EngineRun(Overseer):
    """One round's run, and the engine's answer for it: the effective multi-action switch
    (``multi``) and online cap (``cap``), and per attempt, per streamed action, its step and row
    (``steps``, ``rows``). While it runs it is the round's online overseer (one per decision
    call: the overseer's state and rules, :meth:`Overseer.judge`), with the ledger and the last
    stream. (One object per round: the answer is the run itself.)"""

    __slots__ = (
        "actions",
        "code_complete",
        "ledger",
        "multi",
        "order_dependent",
        "policy",
        "rows",
        "spec",
        "steps",
        "stop",
    )

    # Made by :func:`run`: the overseer's own ``__init__`` (no second call per round), then the
    # round's fields, set there.
    spec: RoundSpec
    policy: RoundPolicy
    multi: bool
    #: The round's ``allow_single_exec_with_code``, and the files whose outcome depends on the
    #: runtime's set order under it (``backstop.set_order_files``; ``()``: none).
    code_complete: bool
    order_dependent: tuple[str, ...]
    steps: list[list[Step]]
    rows: list[list[Row]]
    #: Made when the first call starts early (most rounds have none).
    ledger: RoundLedger | None
    # The last streamed attempt (set by :meth:`stream`, which every round runs first): its
    # actions, and where its stream stopped (the actions before ``stop`` completed: the online
    # rejection's index, else the attempt's length).
    actions: Sequence[Action]
    stop: int

    def stream(self, actions: Sequence[Action], facts: _Facts) -> None:
        """One attempt: each action's step (a plain call's kept step, found by the action's raw
        fields — an id found as it stands is a known, stripped id; anything else is worked out
        by ``_step``), the overseer's verdict as it is identified, and the early listener and
        the ledger as it completes."""
        every = self.rows
        if every:
            # The stream before was replaced by this one: only its early starts ran.
            for row in every[-1]:
                if row.verdict == ACCEPTED:
                    row.verdict, row.why = DROPPED, REPLACED
        steps: list[Step] = []
        rows: list[Row] = []
        self.steps.append(steps)
        every.append(rows)
        self.actions = actions
        self.stop = len(actions)
        tools = facts.tools
        for index, action in enumerate(actions):
            step = None
            if action.action == "call_tool":
                fact = tools.get(action.tool_id)  # type: ignore[arg-type]
                if fact is not None and fact.plain:
                    params = action.params
                    if params is None or type(params) is dict:
                        step = fact.steps.get(index)
            if step is None:
                step = _step(index, action, facts)
            steps.append(step)
            row = Row()
            rows.append(row)
            if step.identified:
                rejection = self.judge(step)
                if rejection is not None:
                    # (The rejection is its own extra fields, worked out when read.)
                    code = rejection.code
                    row.online = Stage(REJECTED, code, rejection)
                    row.verdict, row.code, row.extra = REJECTED, code, rejection
                    # The stream stops here: the rest is never observed (its steps are still
                    # worked out: the dry-run shows each action's strategy).
                    self.stop = index
                    for later in range(index + 1, len(actions)):
                        steps.append(_step(later, actions[later], facts))
                        rows.append(Row())
                    return
                row.online = _ONLINE_ACCEPTED
                row.verdict = ACCEPTED
            if not step.call:
                continue
            # The early listener, as the call's JSON completes: a call the ledger holds is a
            # dedup; else an eligible call starts now (the dry-run executes nothing).
            ledger = self.ledger
            if ledger is not None:
                hit = ledger.lookup(index, step.tool, action.params)
                if hit is not None:
                    row.reuse(hit)
                    continue
            # (Most calls' traits are not early: ``starts_early``'s first condition, asked first.)
            if step.early_traits and starts_early(step, self.accepted.get(index)):
                if ledger is None:
                    ledger = self.ledger = RoundLedger()
                ledger.record(index, step.tool, action.params)
                row.early, row.ledger, row.record = True, "started", index

    def post_generation(self) -> None:
        """After the last attempt: what runs of the decision the runtime received. Every action
        accepted while streaming is in ``sources``; all but the one that runs are dropped when
        the bundle is not checked as a bundle."""
        rows = self.rows[-1]
        stop = self.stop
        if self.rejected:
            # In the order accepted (a re-stream may have accepted a later index first).
            sources: Sequence[int] = [index for index in self.accepted if index < stop]
        else:
            sources = range(stop)
        if not sources:
            return  # nothing usable was accepted: the runtime retries; nothing runs
        if not self.multi and not self.rejected and len(self.actions) > 1:
            # Multi-action off, nothing rejected while streaming: the channel streamer reads two
            # or more <channel:action> instances as multiple_channel_instances:N, so nothing of
            # the decision runs (its early starts have run) and the model is asked again
            # (recorded through v3's real decision node: the v3off conformance family).
            extra = {"parser_error": f"multiple_channel_instances:{len(self.actions)}"}
            for row in rows:
                if row.verdict == ACCEPTED:
                    row.finish(REJECTED, SCHEMA_ERROR, extra)
            return
        if len(sources) > 1:
            if self.multi:
                # Every source gets the backstop's verdict.
                self.bundle(sources, rows)
                return
            for later in sources[1:]:
                row = rows[later]
                if row.verdict == ACCEPTED:
                    row.verdict, row.why = DROPPED, SINGLE_ONLY
        source = sources[0]
        step = self.steps[-1][source]
        row = rows[source]
        if step.decision_error is not None:
            row.verdict, row.code, row.why = REJECTED, step.decision_error, ""
            return
        row.verdict, row.why = ACCEPTED, ""
        if not step.call:
            return
        ledger = self.ledger
        action = self.actions[source]
        if not step.protocol_ok or step.tool in EXEC_ONLY_TOOLS:
            held = ledger is not None and ledger.lookup(0, step.tool, action.params)
            rejection = single_call_rejection(action, self.policy, held=bool(held))
            if rejection is not None:
                row.finish(REJECTED, *rejection)
                return
        if ledger is not None:
            self.execute(0, step, action.params, row)

    def bundle(self, sources: Sequence[int], rows: list[Row]) -> None:
        steps, stream = self.steps[-1], self.actions
        bundle: Sequence[Step]
        actions: Sequence[Action]
        if self.rejected:
            bundle = [steps[i] for i in sources]
            actions = [stream[i] for i in sources]
        else:
            # Nothing was rejected: the bundle is the whole stream, in stream order.
            bundle, actions = steps, stream
        ledger = self.ledger
        # A call the ledger already holds at its bundle position was checked when it started
        # (asked only of calls that fail the check: for the others it changes nothing).
        prevalidated: frozenset[int] = _NONE
        if ledger is not None:
            held = [
                position
                for position, step in enumerate(bundle)
                if step.call
                and not step.protocol_ok
                and ledger.lookup(position, step.tool, actions[position].params)
            ]
            if held:
                prevalidated = frozenset(held)
        result = backstop(
            actions,
            self.policy,
            max_actions=self.spec.max_actions,
            prevalidated=prevalidated,
            exec_code_complete=self.code_complete,
            checked=bundle,
        )
        self.order_dependent = result.order_dependent
        for position, (code, extra) in result.rejected.items():
            row = rows[sources[position]]
            row.backstop = Stage(REJECTED, code, extra)
            row.finish(REJECTED, code, extra)
        kept = result.accepted
        final = result.final_index
        for position in kept:
            row = rows[sources[position]]
            row.backstop = _BACKSTOP_ACCEPTED
            row.finish(ACCEPTED)
        if final is not None and final not in kept:
            row = rows[sources[final]]
            row.backstop = _BACKSTOP_ACCEPTED
            row.finish(ACCEPTED)
        if ledger is not None:
            for position in kept:
                self.execute(
                    position, bundle[position], actions[position].params, rows[sources[position]]
                )

    def execute(self, position: int, step: Step, params: Any, row: Row) -> None:
        """Post-generation execution: a call the ledger holds at its bundle position (or by
        fingerprint) is not run again."""
        ledger = self.ledger
        if not step.call or ledger is None:
            return
        hit = ledger.lookup(position, step.tool, params)
        if hit is None:
            return
        if row.ledger != "started":
            row.reuse(hit)
        elif hit.index != row.record:
            row.reused = hit.index
