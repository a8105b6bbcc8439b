"""One round assembled from its events (DESIGN §4): the timeline the live view and the API show.

Events arrive out of order and more than once, so assembly never depends on arrival order: the
events are de-duplicated by ``event_id`` and applied in one total order, ``(ts, event_id)``. Where
two distinct events disagree (two ``round.finished``, say) the later one in that order wins —
except ``round.started``, where the earliest marks the start. The same set of events therefore
always gives an equal :class:`AssembledRound`.

One module over 500 lines on purpose: the assembly kept in each row, its merge and its summary,
and the full assembly of a round page must agree on every rule of that order; split, they drift.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import chain
from typing import Any, Final, TypedDict

import orjson

from core.timewindow import format_ts
from core.vocabulary import (
    ACTION_ACCEPTED,
    ACTION_OBSERVED,
    ACTION_REJECTED,
    GENERATION_FINISHED,
    LEDGER_DEDUP,
    ROUND_FINISHED,
    ROUND_KINDS,
    ROUND_STARTED,
    TOOL_EARLY_STARTED,
    TOOL_FINISHED,
    TOOL_STARTED,
    TOOL_TIMEOUT,
)
from engine.round.overseer import explain_rejection
from observe.domain.events import ACTION_EVENT_TYPES, Event

#: Kinds a round can show (``AssembledRound.has``), each with the event type that marks it.
KIND_EVENTS: Final[Mapping[str, str]] = {kind.name: kind.event_type for kind in ROUND_KINDS}
#: ``counts`` keys (besides ``actions``), each with the event type it counts.
COUNT_EVENTS: Final[Mapping[str, str]] = {kind.counter: kind.event_type for kind in ROUND_KINDS}


@dataclass(frozen=True)
class Dedup:
    """The ledger found this call already started in the round: it reused the original call."""

    original_action_index: int
    match: str
    fingerprint: str


@dataclass(frozen=True)
class Timeout:
    limit_ms: float
    elapsed_ms: float
    async_alternative: str | None
    #: A bridge's inferred timeout: the error code the runtime published instead (KDCube's
    #: ``missing_tool_output`` for an isolated tool killed at its limit).
    runtime_error_code: str | None = None


@dataclass(frozen=True)
class RoundAction:
    """One streamed action of one attempt, with everything its events said about it.

    ``action`` is ``None`` until its ``action.observed`` arrives. ``status`` is ``ok`` or ``error``
    from ``tool.finished``, or ``timeout`` when the call only timed out. ``early`` is True for a
    call the runtime treated as early-eligible (it started early, or the ledger deduplicated it).
    """

    index: int
    action: str | None = None
    tool_id: str | None = None
    verdict: str | None = None
    code: str | None = None
    extra: Mapping[str, Any] | None = None
    strategy: tuple[str, ...] | None = None
    explanation: str | None = None
    early: bool = False
    early_started_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    status: str | None = None
    duration_ms: float | None = None
    ledger: str | None = None
    tool_call_id: str | None = None
    dedup: Dedup | None = None
    timeout: Timeout | None = None
    #: Why the call failed, as its ``tool.finished`` said (optional fields, DESIGN §4).
    error_code: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class Attempt:
    """One stream of the round's decision; a provider retry re-streams it as the next attempt."""

    attempt: int
    actions: tuple[RoundAction, ...]
    generation_finished_at: datetime | None


@dataclass(frozen=True)
class AssembledRound:
    """A round (agent, turn_id, iteration) as its events tell it; ``outcome`` None = in progress."""

    agent: str
    turn_id: str
    iteration: int
    started_at: datetime
    finished_at: datetime | None
    generation_finished_at: datetime | None
    outcome: str | None
    policy_hash: str | None
    max_actions: int | None
    counts: Mapping[str, int]
    has: frozenset[str]
    tool_ids: frozenset[str]
    attempts: tuple[Attempt, ...]
    events: tuple[Event, ...] = field(repr=False)
    #: Why the round failed, as its ``round.finished`` said (optional fields, DESIGN §4).
    error_code: str | None = None
    error_message: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.agent, self.turn_id, self.iteration)


def assemble(events: Iterable[Event]) -> AssembledRound:
    """Build the round from its events, whatever their order and however often each was sent.

    Every event must belong to the same round; raises ``ValueError`` otherwise or when there are
    none. Events repeating an ``event_id`` count once (if a repeat differs in content, which the
    store refuses anyway, the same one is kept whatever the order). This is
    :func:`assembly_merge` of all the events into a fresh assembly, plus the events themselves.
    """
    given = list(events)
    if not given:
        raise ValueError("a round needs at least one event")
    # Checked before de-duplication, which would hide a repeated id sent for another round.
    keys = {event.round_key for event in given}
    if len(keys) > 1:
        raise ValueError(f"events of different rounds cannot be assembled together: {sorted(keys)}")
    unique = _unique(given)
    ordered = tuple(sorted(unique, key=lambda event: (event.ts, event.event_id)))
    state = assembly_merge(assembly_new(), ordered)
    return assembly_round(ordered[0].round_key, state, events=ordered)


# --- the assembly: what a round's events say, kept small and merged a batch at a time ---------
#
# A round's assembly is a JSON-ready dict that holds, for the round and for each of its action
# slots (attempt, index), the events that decide what is shown: per event type the latest one in
# (ts, event_id) order (the earliest for ``round.started``), reduced to the fields that matter.
# Merging keeps, per key, the greater (or lesser) of two marks, so it is commutative, associative
# and idempotent: any split of a round's events into batches, in any order and with repeats,
# merges to the same assembly, and a batch costs the same however many events the round holds.
# Replaying a slot's marks in (ts, event_id) order gives what replaying all of its events would:
# each event type overwrites the same fields every time it occurs.

#: The fields each action-level event type contributes to its action.
_SLOT_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    ACTION_OBSERVED: ("action", "tool_id"),
    ACTION_ACCEPTED: ("strategy",),
    ACTION_REJECTED: ("code", "extra", "strategy"),
    TOOL_EARLY_STARTED: ("tool_call_id",),
    LEDGER_DEDUP: ("tool_call_id", "original_action_index", "match", "fingerprint"),
    TOOL_STARTED: ("tool_call_id",),
    TOOL_FINISHED: ("tool_call_id", "status", "duration_ms", "error_code", "error_message"),
    TOOL_TIMEOUT: (
        "tool_call_id",
        "limit_ms",
        "elapsed_ms",
        "async_alternative",
        "runtime_error_code",
    ),
}
assert set(_SLOT_FIELDS) == set(ACTION_EVENT_TYPES)
#: Slot keys besides the event types: the earliest named tool, the earliest observed params.
_TOOL, _PARAMS = "tool", "params"

#: One kept event: ``[ts, event_id, *fields]``, ``ts`` as the event sent it (RFC 3339 text, so
#: that ``(ts, event_id)`` orders marks as it orders events), then the fields its type keeps
#: (:data:`_SLOT_FIELDS`; ``round.started``: max_actions, policy_hash, multi_action_mode;
#: ``round.finished``: outcome, error_code, error_message; ``generation.finished``:
#: exec_code_complete when it said; ``tool``: tool_id; ``params``: None,
#: the params as JSON text). A mark stored before a field was added is shorter: the missing
#: fields read as None.
#: A list, not a tuple: it is stored as JSON and read back as a list.
Mark = list[Any]
#: One action slot, ``"{attempt}:{index}"`` in :class:`Assembly`: per action-level event type
#: (and :data:`_TOOL`, :data:`_PARAMS`) the mark it keeps.
Slot = dict[str, Mark]


class _Held(TypedDict):
    first: Mark | None
    start: Mark | None
    end: Mark | None
    gen: dict[str, Mark]
    tools: list[str]
    slots: dict[str, Slot]


class Assembly(_Held, total=False):
    """A round's assembly, the JSON kept in its row (the ``assembly`` column) and merged a batch
    at a time. A TypedDict rather than a dataclass: it is the stored JSON itself, so reading a
    row and merging into it convert nothing (the merge is on every ingest's path), and rows
    stored before keep reading as they are.

    ``first``: the earliest event's mark; ``start``: the earliest ``round.started``; ``end``: the
    latest ``round.finished``; ``gen``: per attempt (its number as text) the latest
    ``generation.finished``; ``tools``: every tool id named, sorted; ``slots``: the actions;
    ``inferred``: present (True) once an event said it was inferred (the KDCube bridge). (Not
    ``NotRequired``: under ``from __future__ import annotations`` the class would count it as
    required at run time, ``total=False`` on a subclass says it either way.)
    """

    inferred: bool


def assembly_new() -> Assembly:
    """The assembly of a round with no events yet."""
    return {"first": None, "start": None, "end": None, "gen": {}, "tools": [], "slots": {}}


def _keep(holder: dict[str, Any], key: str, mark: Mark, *, latest: bool) -> None:
    """Keep ``mark`` under ``key`` if it is later (``latest``) or earlier than the one held."""
    old = holder.get(key)
    if old is None:
        holder[key] = mark
        return
    order, held = (mark[0], mark[1]), (old[0], old[1])
    if (order > held) if latest else (order < held):
        holder[key] = mark


def _params_text(params: Any) -> str:
    try:
        return orjson.dumps(params).decode("utf-8")
    except TypeError:  # beyond what ingest stores today (an integer past 64 bits)
        return json.dumps(params, ensure_ascii=False)


def assembly_merge(state: Assembly, events: Iterable[Event]) -> Assembly:
    """Fold ``events`` (of one round) into ``state`` in place and return it.

    Order, repeats and batching never change the result (see the comment above). A repeated
    ``event_id`` with other content keeps the copy already held; :func:`assemble` picks one
    deterministically first, and the store refuses such repeats.
    """
    slots = state["slots"]
    generation = state["gen"]
    # ``first``, ``start`` and ``end`` are kept like a slot's marks: the same record seen as a
    # plain dict (an annotation, not a ``cast`` call: this runs once a batch on ingest's path).
    top: dict[str, Any] = state  # type: ignore[assignment]
    tools = set(state["tools"])
    for event in events:
        data = event.data
        ts, event_id = data["ts"], event.event_id
        _keep(top, "first", [ts, event_id], latest=False)
        if data.get("inferred") is True:
            # Some of the round's events were inferred (the KDCube bridge): drift compares only
            # what the events carry.
            state["inferred"] = True
        tool_id = data.get("tool_id")
        named = isinstance(tool_id, str)
        if named:
            tools.add(tool_id)  # type: ignore[arg-type]  # narrowed by ``named``
        event_type = event.type
        fields = _SLOT_FIELDS.get(event_type)
        if fields is not None:
            index = data.get("action_index")
            if not isinstance(index, int):
                continue
            slot = slots.setdefault(f"{event.attempt}:{index}", {})
            _keep(slot, event_type, [ts, event_id, *(data.get(f) for f in fields)], latest=True)
            if named:
                _keep(slot, _TOOL, [ts, event_id, tool_id], latest=False)
            if event_type == ACTION_OBSERVED and "params" in data:
                # As JSON text: a store may reorder an object's keys (PostgreSQL's jsonb does),
                # and the runtime's rules read their order (``path`` must come first).
                text = _params_text(data["params"])
                _keep(slot, _PARAMS, [ts, event_id, None, text], latest=False)
        elif event_type == ROUND_STARTED:
            mode = data.get("multi_action_mode")
            mark = [ts, event_id, data["max_actions"], data.get("policy_hash"), mode]
            version = str(data.get("react_version") or "").strip().lower()
            if version in ("v2", "v3"):
                # The react agent it reported, and whether a bridge inferred it.
                mark += [version, bool(data.get("inferred"))]
            _keep(top, "start", mark, latest=False)
        elif event_type == ROUND_FINISHED:
            mark = [ts, event_id, data["outcome"]]
            if data.get("error_code") is not None or data.get("error_message") is not None:
                mark += [data.get("error_code"), data.get("error_message")]
            _keep(top, "end", mark, latest=True)
        elif event_type == GENERATION_FINISHED:
            complete = data.get("exec_code_complete")
            gen_mark = [ts, event_id, *([complete] if isinstance(complete, bool) else [])]
            _keep(generation, str(event.attempt), gen_mark, latest=True)
    state["tools"] = sorted(tools)
    return state


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


@dataclass(frozen=True)
class AssemblySummary:
    """What the round's row keeps in columns (cheap: no action is built)."""

    started_at: datetime
    finished_at: datetime | None
    generation_finished_at: datetime | None
    outcome: str | None
    policy_hash: str | None
    max_actions: int | None
    counts: Mapping[str, int]
    tool_ids: frozenset[str]
    #: Why the round failed (its ``round.finished``'s optional fields), else None.
    error_code: str | None = None
    error_message: str | None = None


def assembly_summary(state: Assembly) -> AssemblySummary:
    """The round-level facts of an assembly that holds at least one event."""
    start, end, generation, first = state["start"], state["end"], state["gen"], state["first"]
    if first is None:
        raise ValueError("an assembly without events has no summary")
    # How many slots hold each event type (every key of a slot is a distinct type), counted
    # in one pass.
    held = Counter(chain.from_iterable(state["slots"].values()))
    counts = {"actions": len(state["slots"])}
    for kind in ROUND_KINDS:
        counts[kind.counter] = held[kind.event_type]
    last_attempt = max(generation, key=int) if generation else None
    error_code, error_message = round_error(state)
    return AssemblySummary(
        started_at=_time(start[0] if start is not None else first[0]),
        finished_at=_time(end[0]) if end is not None else None,
        # The last attempt's generation is the one the round's tools ran after.
        generation_finished_at=(
            _time(generation[last_attempt][0]) if last_attempt is not None else None
        ),
        outcome=end[2] if end is not None else None,
        policy_hash=start[3] if start is not None else None,
        max_actions=start[2] if start is not None else None,
        counts=counts,
        tool_ids=frozenset(state["tools"]),
        error_code=error_code,
        error_message=error_message,
    )


def round_error(state: Mapping[str, object]) -> tuple[str | None, str | None]:
    """Why the round failed, as its ``round.finished`` said (``error_code``, ``error_message``),
    read from an assembly's end mark alone; ``(None, None)`` when it said nothing."""
    end: Any = state.get("end")
    if not isinstance(end, list) or len(end) < 5:
        return None, None
    return end[3], end[4]


def _slot_key(key: str) -> tuple[int, int]:
    attempt, _, index = key.partition(":")
    return int(attempt), int(index)


def assembly_actions(state: Assembly) -> dict[tuple[int, int], RoundAction]:
    """Every action of the round by (attempt, index), explained, from the assembly alone."""
    actions: dict[tuple[int, int], RoundAction] = {}
    for key, slot in state["slots"].items():
        attempt, index = _slot_key(key)
        marks = sorted(
            (mark[0], mark[1], event_type, mark)
            for event_type, mark in slot.items()
            if event_type in _SLOT_FIELDS
        )
        action = RoundAction(index=index)
        for ts, _, event_type, mark in marks:
            names, values = _SLOT_FIELDS[event_type], mark[2:]
            # A mark stored before a field was added is shorter: the missing fields are None.
            fields = {name: values[i] if i < len(values) else None for i, name in enumerate(names)}
            action = _apply(action, event_type, _time(ts), fields)
        # The observed action names the tool (or none); until it arrives, the earliest event
        # that names one does.
        observed = slot.get(ACTION_OBSERVED)
        tool = slot.get(_TOOL)
        tool_id = observed[3] if observed is not None else (tool[2] if tool is not None else None)
        actions[(attempt, index)] = _explained(replace(action, tool_id=tool_id))
    return dict(sorted(actions.items()))


@dataclass(frozen=True, slots=True)
class SlotOutcome:
    """What the events reported for one action, in short: as :func:`assembly_actions` would
    give it (the later of accepted/rejected decides, the later of early start/dedup is the
    ledger), without building and explaining whole actions (the drift check after every batch)."""

    action: str | None
    tool_id: str | None
    verdict: str | None
    code: str | None
    early: bool
    dedup: bool


def _later(first: Mark | None, second: Mark | None) -> Mark | None:
    if first is None or second is None:
        return first or second
    return first if (first[0], first[1]) > (second[0], second[1]) else second


def assembly_outcomes(state: Assembly) -> dict[tuple[int, int], SlotOutcome]:
    found: dict[tuple[int, int], SlotOutcome] = {}
    for key, slot in state["slots"].items():
        accepted, rejected = slot.get(ACTION_ACCEPTED), slot.get(ACTION_REJECTED)
        decided = _later(accepted, rejected)
        started, dedup = slot.get(TOOL_EARLY_STARTED), slot.get(LEDGER_DEDUP)
        ledger = _later(started, dedup)
        observed, tool = slot.get(ACTION_OBSERVED), slot.get(_TOOL)
        verdict = None
        if decided is not None:
            verdict = "rejected" if decided is rejected else "accepted"
        found[_slot_key(key)] = SlotOutcome(
            action=observed[2] if observed is not None else None,
            tool_id=observed[3] if observed is not None else (tool[2] if tool else None),
            verdict=verdict,
            code=rejected[2] if decided is not None and decided is rejected else None,
            early=ledger is not None,
            dedup=ledger is not None and ledger is dedup,
        )
    return found


def _params(mark: Mark) -> Any:
    """The params a mark holds: as JSON text (key order kept), or, in assemblies stored before,
    as the value itself."""
    return json.loads(mark[3]) if len(mark) > 3 else mark[2]


def assembly_params(state: Assembly) -> dict[tuple[int, int], Any]:
    """The params of each observed action that sent some, by (attempt, index)."""
    return {
        _slot_key(key): _params(slot[_PARAMS])
        for key, slot in state["slots"].items()
        if _PARAMS in slot
    }


#: Protocol v1 does not carry an action's ``final_answer`` or ``notes`` (only whether the runtime
#: accepted it): where the recorded verdict shows the runtime saw one, the replayable form holds
#: this stand-in text, which the engine only tests for presence.
PRESENT: Final = "(present: the event protocol does not carry the text)"
_FINALS: Final = frozenset({"complete", "exit"})


def _text_fields(action: str, slot: Slot) -> dict[str, str]:
    """``final_answer`` / ``notes`` as the recorded verdict shows them: a final action the runtime
    did not refuse for a missing answer had one; one refused for notes had notes; a call
    refused for carrying a final answer had one."""
    rejected = slot.get(ACTION_REJECTED)
    code = rejected[2] if rejected is not None else None
    found: dict[str, str] = {}
    name = action.strip()
    if name in _FINALS and code != "final_answer_required":
        found["final_answer"] = PRESENT
    if name in _FINALS and code == "final_answer_with_notes":
        found["notes"] = PRESENT
    if name == "call_tool" and code == "final_answer_with_tool_call":
        found["final_answer"] = PRESENT
    return found


def started_react_version(state: Assembly) -> tuple[str | None, str | None]:
    """The react agent ``round.started`` named: (reported by the runtime, inferred by a bridge);
    at most one is set (the precedence of :mod:`engine.round.react_version` ranks them)."""
    start = state["start"]
    if start is None or len(start) < 7 or start[5] not in ("v2", "v3"):
        return None, None
    return (None, start[5]) if start[6] else (start[5], None)


def exec_code_complete(state: Assembly) -> bool | None:
    """Whether the round's decision streamed its code channel complete, as the last stream's
    ``generation.finished`` said (``exec_code_complete``); None: not said (drift and impact then
    predict both)."""
    marks = state["gen"]
    if not marks:
        return None
    last = marks[max(marks, key=int)]
    return last[2] if len(last) > 2 and isinstance(last[2], bool) else None


def recorded_round(key: tuple[str, str, int], state: Assembly) -> dict[str, Any] | None:
    """The round as the engine replays it (a dry-run round plus its ``agent``; impact, issue
    13): per attempt, the observed actions in index order with their tool ids and params, the
    round's ``max_actions``, the ``multi_action_mode`` and ``react_version`` it reported. ``None``
    when no action
    was observed (nothing to replay: a round the bridge only inferred, or one just started)."""
    attempts: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for slot_key, slot in state["slots"].items():
        observed = slot.get(ACTION_OBSERVED)
        if observed is None or not isinstance(observed[2], str):
            continue
        attempt, index = _slot_key(slot_key)
        action: dict[str, Any] = {"action": observed[2]}
        if observed[3] is not None:
            action["tool_id"] = observed[3]
        if _PARAMS in slot:
            action["params"] = _params(slot[_PARAMS])
        action.update(_text_fields(observed[2], slot))
        attempts.setdefault(attempt, []).append((index, action))
    if not attempts:
        return None
    start = state["start"]
    found: dict[str, Any] = {"agent": key[0], "turn_id": key[1], "iteration": key[2]}
    if start is not None and isinstance(start[2], int):
        found["max_actions"] = start[2]
    if start is not None and len(start) > 4 and isinstance(start[4], str):
        found["multi_action_mode"] = start[4]
    complete = exec_code_complete(state)
    if complete is not None:
        found["exec_code_complete"] = complete
    reported, inferred = started_react_version(state)
    if reported or inferred:
        # The react agent round.started named (the runtime's report, else a bridge's
        # inference): the round's own, which a replay predicts it under.
        found["react_version"] = reported or inferred
    found["attempts"] = [
        [action for _, action in sorted(attempts[number])] for number in sorted(attempts)
    ]
    return found


def assembly_round(
    key: tuple[str, str, int], state: Assembly, *, events: tuple[Event, ...] = ()
) -> AssembledRound:
    """The round an assembly describes (``events``: its stored events, when the caller has
    them; cards and lists need none)."""
    summary = assembly_summary(state)
    actions = assembly_actions(state)
    generation = {int(attempt): _time(mark[0]) for attempt, mark in state["gen"].items()}
    attempts = tuple(
        Attempt(
            attempt=number,
            actions=tuple(action for (attempt, _), action in actions.items() if attempt == number),
            generation_finished_at=generation.get(number),
        )
        for number in sorted({attempt for attempt, _ in actions} | set(generation))
    )
    slots = state["slots"].values()
    return AssembledRound(
        agent=key[0],
        turn_id=key[1],
        iteration=key[2],
        started_at=summary.started_at,
        finished_at=summary.finished_at,
        generation_finished_at=summary.generation_finished_at,
        outcome=summary.outcome,
        policy_hash=summary.policy_hash,
        max_actions=summary.max_actions,
        counts=summary.counts,
        has=frozenset(
            kind.name for kind in ROUND_KINDS if any(kind.event_type in slot for slot in slots)
        ),
        tool_ids=summary.tool_ids,
        attempts=attempts,
        events=events,
        error_code=summary.error_code,
        error_message=summary.error_message,
    )


def _unique(events: Iterable[Event]) -> list[Event]:
    by_id: dict[str, Event] = {}
    for event in events:
        kept = by_id.get(event.event_id)
        if kept is None or _content_key(event) < _content_key(kept):
            by_id[event.event_id] = event
    return list(by_id.values())


def _content_key(event: Event) -> str:
    # A total order on content, so that which of two differing repeats survives never depends on
    # the order they came in.
    try:
        return json.dumps(event.data, sort_keys=True, default=repr)
    except TypeError:
        # Mapping keys of mixed types cannot be sorted (only possible from Python, not JSON).
        return repr(event.data)


def _apply(
    action: RoundAction, event_type: str, ts: datetime, data: Mapping[str, Any]
) -> RoundAction:
    """Fold one event's fields into what is known about its action (in (ts, id) order)."""
    if event_type == ACTION_OBSERVED:
        return replace(action, action=data["action"])
    if event_type == ACTION_ACCEPTED:
        strategy = data.get("strategy")
        return replace(
            action,
            verdict="accepted",
            code=None,
            extra=None,
            strategy=tuple(strategy) if strategy is not None else None,
        )
    if event_type == ACTION_REJECTED:
        # The protocol carries no strategy for a rejection; a runtime that sends one anyway (an
        # extra field) gets a fuller explanation.
        sent = data.get("strategy")
        strategy = (
            tuple(sent)
            if isinstance(sent, list) and all(isinstance(item, str) for item in sent)
            else None
        )
        return replace(
            action,
            verdict="rejected",
            code=data["code"],
            extra=data.get("extra"),
            strategy=strategy,
        )
    if event_type == TOOL_EARLY_STARTED:
        return replace(
            action,
            early=True,
            early_started_at=ts,
            ledger="started",
            tool_call_id=data["tool_call_id"],
        )
    if event_type == LEDGER_DEDUP:
        return replace(
            action,
            early=True,
            ledger="dedup",
            tool_call_id=data["tool_call_id"],
            dedup=Dedup(data["original_action_index"], data["match"], data["fingerprint"]),
        )
    if event_type == TOOL_STARTED:
        return replace(action, started_at=ts, tool_call_id=data["tool_call_id"])
    if event_type == TOOL_FINISHED:
        return replace(
            action,
            finished_at=ts,
            status=data["status"],
            duration_ms=data["duration_ms"],
            tool_call_id=data["tool_call_id"],
            error_code=data.get("error_code"),
            error_message=data.get("error_message"),
        )
    if event_type == TOOL_TIMEOUT:
        timeout = Timeout(
            data["limit_ms"],
            data["elapsed_ms"],
            data.get("async_alternative"),
            data.get("runtime_error_code"),
        )
        if action.status is not None and action.status != "timeout":
            # A tool.finished already told how the call ended; the timeout adds the detail.
            return replace(action, timeout=timeout)
        return replace(
            action,
            timeout=timeout,
            finished_at=ts,
            status="timeout",
            duration_ms=data["elapsed_ms"],
            tool_call_id=data["tool_call_id"],
        )
    return action


def _explained(action: RoundAction) -> RoundAction:
    """Word a rejection once everything about the action is known (its action name may arrive
    after the rejection)."""
    if action.verdict != "rejected" or action.code is None:
        return action
    name = action.action
    if name is None:
        # Not observed (yet): a named tool means a call_tool; otherwise say "the action".
        name = "call_tool" if action.tool_id is not None else ""
    text = explain_rejection(
        action.code,
        action.extra,
        action=name,
        tool_id=action.tool_id,
        strategy=action.strategy or (),
    )
    return replace(action, explanation=text)


# --- the API shapes --------------------------------------------------------------------------


def _ts(value: datetime | None) -> str | None:
    return format_ts(value) if value is not None else None


def round_to_dict(
    round_: AssembledRound, url: str | None, *, agent_in_policy: bool = True
) -> dict[str, Any]:
    """The round object of the API (§4); ``agent_in_policy`` is for the caller, who knows the
    policy, to say."""
    return {
        "agent": round_.agent,
        "turn_id": round_.turn_id,
        "iteration": round_.iteration,
        "started_at": _ts(round_.started_at),
        "finished_at": _ts(round_.finished_at),
        "outcome": round_.outcome,
        "error_code": round_.error_code,
        "error_message": round_.error_message,
        "policy_hash": round_.policy_hash,
        "agent_in_policy": agent_in_policy,
        "counts": dict(round_.counts),
        "url": url,
    }


def round_detail_dict(
    round_: AssembledRound, url: str | None, *, agent_in_policy: bool = True
) -> dict[str, Any]:
    """The round object plus its attempts (each action's verdict, early start, ledger, timing),
    ``max_actions``, ``generation_finished_at`` and the stored events in timeline order."""
    out = round_to_dict(round_, url, agent_in_policy=agent_in_policy)
    out["max_actions"] = round_.max_actions
    out["generation_finished_at"] = _ts(round_.generation_finished_at)
    out["attempts"] = [
        {
            "attempt": attempt.attempt,
            "generation_finished_at": _ts(attempt.generation_finished_at),
            "actions": [action_to_dict(action) for action in attempt.actions],
        }
        for attempt in round_.attempts
    ]
    out["events"] = [dict(event.data) for event in round_.events]
    return out


def action_to_dict(action: RoundAction) -> dict[str, Any]:
    """One action of an attempt as JSON-ready data."""
    return {
        "index": action.index,
        "action": action.action,
        "tool_id": action.tool_id,
        "verdict": action.verdict,
        "code": action.code,
        "extra": dict(action.extra) if action.extra is not None else None,
        "strategy": list(action.strategy) if action.strategy is not None else None,
        "explanation": action.explanation,
        "early": action.early,
        "early_started_at": _ts(action.early_started_at),
        "started_at": _ts(action.started_at),
        "finished_at": _ts(action.finished_at),
        "status": action.status,
        "duration_ms": action.duration_ms,
        "error_code": action.error_code,
        "error_message": action.error_message,
        "ledger": action.ledger,
        "tool_call_id": action.tool_call_id,
        "dedup": (
            {
                "original_action_index": action.dedup.original_action_index,
                "match": action.dedup.match,
                "fingerprint": action.dedup.fingerprint,
            }
            if action.dedup is not None
            else None
        ),
        "timeout": (
            {
                "limit_ms": action.timeout.limit_ms,
                "elapsed_ms": action.timeout.elapsed_ms,
                "async_alternative": action.timeout.async_alternative,
                "runtime_error_code": action.timeout.runtime_error_code,
            }
            if action.timeout is not None
            else None
        ),
    }
