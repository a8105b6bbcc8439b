"""KDCube chat envelopes → Traitdeck round events (protocol v1, DESIGN §4), without Django.

KDCube publishes every chat envelope on Redis (``<relay>.<tenant>:<project>:chat.events.<session>``,
message ``{target_sid, session_id, event, data: <envelope>, timestamp}``). A few of them say
something about a round (docs/kdcube-events.md has the table):

- a ``chat.delta`` of the decision agent (``solver.react.v2.decision (N)`` as the runtime writes it,
  ``.iK`` for a multi-action instance) is the first sign of round N → ``round.started``;
- ``react.tool.call`` / ``react.tool.result`` → the action, ``tool.early_started`` (a ``tc_`` id of
  the slot hash arriving before the decision step) or ``tool.started``, and ``tool.finished``;
- ``react.tool.rejected`` → ``action.rejected`` (code, extra, the index when the runtime gives it);
- the ``solver.react.decision`` step → ``generation.finished`` and the accepted actions;
- the next round of the turn, or ``chat.complete`` → ``round.finished``;
- ``chat.error`` (the turn failed: the decision node raised) → ``round.finished`` ``failed`` of the
  turn's open rounds, with the error KDCube sent;
- an isolated call's ``missing_tool_output`` error at or past the isolation limit (the runtime's
  subprocess runner killed it) → an inferred ``tool.timeout`` instead of ``tool.finished``.

Everything the runtime did not publish as such carries ``"inferred": true``; a field with no
signal is null (``max_actions``, ``fingerprint``, ``outcome``, ``action_index``) — never made up.
Event ids are UUIDs derived from the envelope's bytes, so a replayed envelope maps to the same
events and the server counts them as duplicates.

Over 500 lines on purpose: one mapping, envelope kinds in the order a round emits them, sharing
the per-turn state they update; docs/kdcube-events.md's table follows the same order.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from core.vocabulary import (
    ACTION_ACCEPTED,
    ACTION_OBSERVED,
    ACTION_REJECTED,
    CONTROL_CHARS,
    GENERATION_FINISHED,
    LEDGER_DEDUP,
    MAX_ERROR_TEXT,
    MAX_TEXT,
    OUTCOME_FAILED,
    OUTCOME_OK,
    OUTCOME_RETRIED,
    ROUND_FINISHED,
    ROUND_STARTED,
    TOOL_EARLY_STARTED,
    TOOL_FINISHED,
    TOOL_STARTED,
    TOOL_TIMEOUT,
)
from engine.tools.loading import agent_keys
from engine.tools.named_services import DEFAULT_REACT_AGENT_ID

#: The namespace of the bridge's event ids (uuid5 of the envelope digest and the event's place).
ID_NAMESPACE: Final = uuid.UUID("6f9d3c1e-8a4b-5e27-9c10-4b7a2d5e8f31")
DEFAULT_RELAY: Final = "kdcube.relay.chatbot"
DEFAULT_PATTERN: Final = DEFAULT_RELAY + ".*"
CHANNEL_MARK: Final = ":chat.events."
#: The decision agent's delta label (the module name as the runtime writes it, any version).
DECISION_DELTA: Final = re.compile(r"^solver\.react(?:\.v\d+)?\.decision \((\d+)\)(?:\.i\d+)?$")
#: A multi-action instance's delta (``.iK``): only v3 writes one (v2's ``_mk_mainstream`` has no
#: instance); v3's thinking and single-action deltas have none either, so its absence says nothing.
INSTANCE_SUFFIX: Final = re.compile(r"\.i\d+$")
DECISION_STEP: Final = re.compile(r"^react\((\d+)\)\.decision$")
#: How many action indexes are tried when matching a ``tc_`` id to its slot.
MAX_SLOTS: Final = 32
#: Rounds remembered for inference (oldest forgotten first).
MAX_ROUNDS: Final = 5000
#: KDCube's limit for an isolated tool call (``execute_tool_in_isolation``: ``timeout_s=240``).
ISOLATION_TIMEOUT_S: Final = 240.0
#: The error code KDCube publishes for an isolated call its subprocess runner killed at the limit
#: (the result file the child reserved is missing; the timeout error itself is dropped).
MISSING_OUTPUT: Final = "missing_tool_output"
#: v2's decision step after a protocol failure (``solutions/react/v2/runtime.py``): the decision
#: it re-asks with carries ``notes`` "<code>; retry decision" (or "; retry action" after a schema
#: error); the one it exits with carries the code alone, or (a failed ``_validate_decision`` with
#: no retry left) no notes and this final answer.
V2_RETRY_NOTES: Final = re.compile(r"^([a-z_]{1,80}); retry (?:decision|action)$")
V2_EXIT_CODES: Final = frozenset(
    {"action_schema_error", "tool_not_allowed_in_react", "tool_call_invalid", "tool_signature_red"}
)
V2_VALIDATION_EXIT: Final = "Decision validation failed."
#: The ``extra.sub_type`` prefix of the decision's exec streamer deltas (``widgets/exec.py``).
CODE_EXEC: Final = "code_exec."
#: The emit points proposed to the runtime (docs/kdcube-events.md): when a runtime publishes them
#: the bridge maps them as they are (not inferred) and stops inferring what they cover.
EXACT: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "react.round.started": (ROUND_STARTED, ("max_actions", "policy_hash", "multi_action_mode")),
    "react.action.observed": (ACTION_OBSERVED, ("action_index", "action", "tool_id", "params")),
    "react.action.accepted": (ACTION_ACCEPTED, ("action_index", "tool_id", "strategy")),
    "react.action.rejected": (ACTION_REJECTED, ("action_index", "tool_id", "code", "extra")),
    "react.tool.ledger": (
        LEDGER_DEDUP,
        (
            "action_index",
            "tool_id",
            "tool_call_id",
            "original_action_index",
            "match",
            "fingerprint",
        ),
    ),
    "react.generation.finished": (GENERATION_FINISHED, ("exec_code_complete",)),
}


def slot_call_id(turn_id: str, iteration: int, action_index: int) -> str:
    """The runtime's early-execution call id of a slot (DESIGN §2.5)."""
    raw = f"{turn_id.strip()}\x1f{iteration}\x1f{action_index}"
    return "tc_" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]


def map_agent(agent_id: str, agents: Collection[str]) -> str:
    """The policy agent the runtime reads for ``agent_id``: the id itself or a normalized form,
    else ``default_agent`` / ``main`` / ``default``, as its config loader falls back; with no such
    agent in the policy the id itself (the round is then marked "agent not in policy")."""
    for key in agent_keys(agent_id):
        if key in agents:
            return key
    return agent_id.strip() or DEFAULT_REACT_AGENT_ID


@dataclass
class Outcome:
    """What one envelope gave: the events to post, or the reason it gave none."""

    events: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None

    @property
    def inferred(self) -> int:
        return sum(1 for event in self.events if event.get("inferred"))


@dataclass
class _Round:
    agent: str
    turn_id: str
    iteration: int
    decided: bool = False
    finished: bool = False
    accepted: int = 0
    rejected: set[int] = field(default_factory=set)
    rejected_whole: int = 0
    observed: set[int] = field(default_factory=set)
    positions: list[int] = field(default_factory=list)
    bundle: list[Any] = field(default_factory=list)
    used_positions: set[int] = field(default_factory=set)
    #: The parts the runtime reports itself (the proposed emit points): "actions", "generation".
    exact: set[str] = field(default_factory=set)
    #: The stream the bridge places new actions in: 1 once a re-stream is inferred.
    attempt: int = 0
    #: The tool each early start of the first stream ran, by slot.
    early_tools: dict[int, str] = field(default_factory=dict)
    #: Rejections that came without an index, held until the decision step tells whether the
    #: round had one action (then it is action 0) or a bundle (the index stays unknown).
    unindexed: list[tuple[dict[str, Any] | None, dict[str, Any]]] = field(default_factory=list)
    #: The runtime's react.tool.rejected came for this round (only v3 publishes it).
    runtime_rejected: bool = False
    #: The turn's failure a v2 exit decision told (``error_code`` / ``error_message``).
    failure: dict[str, str] | None = None
    #: A v2 re-ask with no decision step (``_validate_decision`` failed: the node returns first).
    silent_retry: bool = False
    #: The decision's exec streamer published something (``code_exec.*`` deltas), a contract
    #: (``code_exec.contract``), code that is not blank (``code_exec.code``).
    code_channel: bool = False
    code_contract: bool = False
    code_text: bool = False


class _Skip(Exception):
    pass


class _Env:
    """One envelope being mapped: its fields and the factory of its events."""

    def __init__(self, envelope: Mapping[str, Any], agents: Collection[str]) -> None:
        self.raw = envelope
        canon = json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self.digest = hashlib.sha256(canon.encode("utf-8")).hexdigest()
        self.type = _text(envelope.get("type"), "type")
        conversation = envelope.get("conversation")
        if not isinstance(conversation, Mapping):
            raise _Skip("no conversation")
        self.turn_id = _text(conversation.get("turn_id"), "conversation.turn_id")
        service = envelope.get("service")
        metadata = envelope.get("metadata")
        agent_id = service.get("agent_id") if isinstance(service, Mapping) else None
        if not agent_id and isinstance(metadata, Mapping):
            agent_id = metadata.get("agent_id")
        self.agent = map_agent(agent_id if isinstance(agent_id, str) else "", agents)
        self.ts = _ts(envelope)
        event = envelope.get("event")
        self.event: Mapping[str, Any] = event if isinstance(event, Mapping) else {}
        data = envelope.get("data")
        self.data: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        self.count = 0

    def make(
        self,
        key: _Round,
        kind: str,
        inferred: bool = True,
        attempt: int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """One event of round ``key``, in the stream the round is in unless ``attempt`` says."""
        self.count += 1
        attempt = key.attempt if attempt is None else attempt
        event: dict[str, Any] = {
            "event_id": str(uuid.uuid5(ID_NAMESPACE, f"{self.digest}:{self.count}")),
            "ts": self.ts,
            "agent": key.agent,
            "turn_id": key.turn_id,
            "iteration": key.iteration,
            **({"attempt": attempt} if attempt else {}),
            "type": kind,
            **fields,
            "source": "kdcube-bridge",
        }
        if inferred:
            event["inferred"] = True
        return event


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Skip(f"no {name}")
    if len(value) > MAX_TEXT or "\x00" in value:
        raise _Skip(f"{name} too long or not text")
    return value


def _ts(envelope: Mapping[str, Any]) -> int:
    ts = envelope.get("ts")
    if isinstance(ts, int) and not isinstance(ts, bool) and 0 < ts < 2**53:
        return ts
    stamp = envelope.get("timestamp")
    if isinstance(stamp, str):
        try:
            parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return int(parsed.timestamp() * 1000)
    raise _Skip("no time (ts or timestamp)")


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _iteration(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise _Skip("no iteration")
    return value


class Mapper:
    """Maps envelopes one at a time, remembering what the round needs for inference."""

    def __init__(
        self, agents: Collection[str] = (), *, isolation_timeout_s: float = ISOLATION_TIMEOUT_S
    ) -> None:
        self.agents = frozenset(agents)
        #: The runtime's isolated-call limit, in ms (``TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S``).
        limit = isolation_timeout_s * 1000
        self.isolation_limit_ms: float = int(limit) if float(limit).is_integer() else limit
        self.rounds: OrderedDict[tuple[str, str, int], _Round] = OrderedDict()
        #: Each call's round, action index and stream, for its result.
        self.calls: dict[str, tuple[tuple[str, str, int], int | None, int]] = {}
        #: The react agent each (agent, turn) proved to run, and the sentence saying why.
        self.versions: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()

    def set_agents(self, agents: Collection[str]) -> None:
        self.agents = frozenset(agents)

    # --- entry points ------------------------------------------------------------------------

    def feed_message(self, channel: str, payload: bytes | str) -> Outcome:
        """One Redis pub/sub message: the relay's JSON with the envelope under ``data``."""
        if CHANNEL_MARK not in channel:
            return Outcome(skipped="not a chat events channel")
        try:
            message = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            return Outcome(skipped="not JSON")
        if not isinstance(message, Mapping) or not isinstance(message.get("data"), Mapping):
            return Outcome(skipped="no envelope (data is not an object)")
        return self.feed(message["data"])

    def feed(self, envelope: Mapping[str, Any]) -> Outcome:
        try:
            env = _Env(envelope, self.agents)
            return self._map(env)
        except _Skip as exc:
            return Outcome(skipped=str(exc))

    # --- the mapping -------------------------------------------------------------------------

    def _round(
        self, env: _Env, iteration: int, out: list[dict[str, Any]], *, exact_start: bool = False
    ) -> _Round:
        key = (env.agent, env.turn_id, iteration)
        found = self.rounds.get(key)
        if found is not None:
            return found
        # A new round of the turn ends the turn's earlier rounds.
        for other in list(self.rounds.values()):
            if (
                other.agent == env.agent
                and other.turn_id == env.turn_id
                and other.iteration < iteration
                and not other.finished
            ):
                out.extend(self._finish(env, other, by_next_round=True))
        made = _Round(env.agent, env.turn_id, iteration)
        self.rounds[key] = made
        while len(self.rounds) > MAX_ROUNDS:
            self.rounds.popitem(last=False)
        if not exact_start:
            known = self.versions.get((env.agent, env.turn_id))
            version: dict[str, Any] = (
                {"react_version": known[0], "inferred_from": known[1]} if known else {}
            )
            out.append(env.make(made, ROUND_STARTED, max_actions=None, policy_hash=None, **version))
        return made

    def _prove(self, env: _Env, version: str, why: str) -> None:
        """What the turn's envelopes proved about the react agent; later rounds' round.started
        carry it (the precedence's "bridge inference", engine.round.react_version)."""
        key = (env.agent, env.turn_id)
        if key not in self.versions:
            self.versions[key] = (version, why)
            while len(self.versions) > MAX_ROUNDS:
                self.versions.popitem(last=False)

    def _finish(
        self,
        env: _Env,
        rnd: _Round,
        failed: Mapping[str, str] | None = None,
        *,
        by_next_round: bool = False,
    ) -> list[dict[str, Any]]:
        """The round's end, after the rejections still waiting for an index (none came: the
        decision step never did). ``failed``: the turn's error (``chat.error``), which makes the
        outcome ``failed`` and is carried as ``error_code`` / ``error_message``."""
        held = [event for pair in rnd.unindexed for event in pair[1:]]
        rnd.unindexed.clear()
        rnd.finished = True
        failed = failed if failed is not None else rnd.failure
        outcome = None
        reason: dict[str, Any] = dict(failed or {})
        if failed is not None:
            outcome = OUTCOME_FAILED
        elif rnd.accepted:
            outcome = OUTCOME_OK
        elif rnd.decided and (rnd.rejected or rnd.rejected_whole):
            outcome = OUTCOME_RETRIED
        elif by_next_round and _v2_silent_retry(rnd):
            outcome, rnd.silent_retry = OUTCOME_RETRIED, True
            reason["inferred_from"] = V2_SILENT_RETRY
        known = self.versions.get((rnd.agent, rnd.turn_id))
        if known is not None:
            # The round that proved it (or a later one): the round page reads it here too.
            reason["react_version"] = known[0]
        return [*held, env.make(rnd, ROUND_FINISHED, outcome=outcome, **reason)]

    def _map(self, env: _Env) -> Outcome:
        out: list[dict[str, Any]] = []
        kind = env.type
        if kind == "chat.delta":
            match = DECISION_DELTA.match(str(env.event.get("agent") or ""))
            if match is None:
                raise _Skip(f"chat.delta of {str(env.event.get('agent'))[:60]!r}: no round signal")
            key = (env.agent, env.turn_id, int(match.group(1)))
            if INSTANCE_SUFFIX.search(str(env.event.get("agent"))):
                self._prove(env, "v3", V3_BY_INSTANCE)
            started = key in self.rounds
            rnd = self._round(env, int(match.group(1)), out)
            if self._code_delta(env, rnd):
                if started:
                    raise _Skip("code channel delta: kept for the round's generation.finished")
            elif started:
                raise _Skip("decision delta of a round already started")
        elif kind in EXACT:
            self._exact(env, out)
        elif kind == "react.tool.call":
            self._tool_call(env, out)
        elif kind == "react.tool.result":
            self._tool_result(env, out)
        elif kind == "react.tool.rejected":
            self._rejected(env, out)
        elif kind == "solver.react.decision":
            self._decision(env, out)
        elif kind in ("chat.complete", "chat.error"):
            open_rounds = [
                r
                for r in self.rounds.values()
                if r.agent == env.agent and r.turn_id == env.turn_id and not r.finished
            ]
            if not open_rounds:
                raise _Skip(f"{kind} with no open round of the turn")
            failed = _turn_error(env.data) if kind == "chat.error" else None
            for rnd in open_rounds:
                out.extend(self._finish(env, rnd, failed))
        else:
            raise _Skip(f"{kind[:60]}: no round signal")
        return Outcome(events=out)

    def _code_delta(self, env: _Env, rnd: _Round) -> bool:
        """A delta of the decision's exec streamer (``DecisionExecCodeStreamer``: marker
        ``subsystem``, ``extra.sub_type`` ``code_exec.*``): noted on the round. False: not one."""
        delta = env.raw.get("delta")
        extra = env.raw.get("extra")
        if not isinstance(delta, Mapping) or delta.get("marker") != "subsystem":
            return False
        sub_type = extra.get("sub_type") if isinstance(extra, Mapping) else None
        if not isinstance(sub_type, str) or not sub_type.startswith(CODE_EXEC):
            return False
        rnd.code_channel = True
        if sub_type == CODE_EXEC + "contract":
            rnd.code_contract = True
        text = delta.get("text")
        if sub_type == CODE_EXEC + "code" and isinstance(text, str) and text.strip():
            rnd.code_text = True
        return True

    @staticmethod
    def _code_complete(rnd: _Round) -> dict[str, bool]:
        """``exec_code_complete`` for the round's ``generation.finished`` when its exec streamer
        published anything: the runtime's ``_exec_streamer_is_complete`` (code captured that is
        not blank, and a contract; the streamer publishes the contract once it has one and each
        code chunk it captures). Nothing when it published nothing (no code channel seen)."""
        if not rnd.code_channel:
            return {}
        return {"exec_code_complete": rnd.code_contract and rnd.code_text}

    def _exact(self, env: _Env, out: list[dict[str, Any]]) -> None:
        """A proposed emit point: the runtime's own event, mapped as it is (parse_event checks
        it on the server like any event)."""
        kind, fields = EXACT[env.type]
        data = env.data
        rnd = self._round(
            env, _iteration(data.get("iteration")), out, exact_start=kind == ROUND_STARTED
        )
        if kind.startswith("action."):
            rnd.exact.add("actions")
            index = data.get("action_index")
            if kind == ACTION_ACCEPTED and isinstance(index, int):
                rnd.accepted += 1
                rnd.observed.add(index)
            if kind == ACTION_REJECTED and isinstance(index, int):
                rnd.rejected.add(index)
        if kind == GENERATION_FINISHED:
            rnd.exact.add("generation")
        extra = {name: data.get(name) for name in fields if name in data}
        if isinstance(data.get("attempt"), int):
            extra["attempt"] = data["attempt"]
        out.append(env.make(rnd, kind, inferred=False, **extra))

    def _slot_index(self, turn_id: str, iteration: int, call_id: str) -> int | None:
        if not call_id.startswith("tc_"):
            return None
        for index in range(MAX_SLOTS):
            if slot_call_id(turn_id, iteration, index) == call_id:
                return index
        return None

    def _observe(
        self,
        env: _Env,
        rnd: _Round,
        index: int | None,
        action: str,
        tool_id: str | None,
        **extra: Any,
    ) -> list[dict[str, Any]]:
        if index is not None and index in rnd.observed:
            return []
        if index is not None:
            rnd.observed.add(index)
        rnd.accepted += 1
        return [
            env.make(
                rnd, ACTION_OBSERVED, action_index=index, action=action, tool_id=tool_id, **extra
            ),
            env.make(rnd, ACTION_ACCEPTED, action_index=index, tool_id=tool_id, strategy=None),
        ]

    def _tool_call(self, env: _Env, out: list[dict[str, Any]]) -> None:
        data = env.data
        iteration = _iteration(data.get("iteration"))
        tool_id = _text(data.get("tool_id"), "tool_id")
        call_id = _text(data.get("tool_call_id"), "tool_call_id")
        rnd = self._round(env, iteration, out)
        reported_index, reported_early = data.get("action_index"), data.get("early")
        exact = _is_index(reported_index) and isinstance(reported_early, bool)
        if exact:
            index: int | None = reported_index
            early = bool(reported_early)
        else:
            index = self._slot_index(env.turn_id, iteration, call_id)
            early = index is not None and not rnd.decided
            if index is None and rnd.decided:
                index = self._bundle_index(rnd, tool_id)
        if "actions" not in rnd.exact:
            summary = data.get("params")
            out.extend(self._observe(env, rnd, index, "call_tool", tool_id, params_summary=summary))
        self.calls[call_id] = ((rnd.agent, rnd.turn_id, rnd.iteration), index, rnd.attempt)
        if early and index is not None:
            rnd.early_tools.setdefault(index, tool_id)
            self._prove(env, "v3", V3_BY_EARLY_START)
        if early:
            fingerprint = data.get("fingerprint") if exact else None
            out.append(
                env.make(
                    rnd,
                    TOOL_EARLY_STARTED,
                    inferred=not (exact and isinstance(fingerprint, str)),
                    action_index=index,
                    tool_id=tool_id,
                    tool_call_id=call_id,
                    fingerprint=fingerprint if isinstance(fingerprint, str) else None,
                )
            )
        else:
            out.append(
                env.make(
                    rnd,
                    TOOL_STARTED,
                    inferred=not exact,
                    action_index=index,
                    tool_id=tool_id,
                    tool_call_id=call_id,
                )
            )

    def _bundle_index(self, rnd: _Round, tool_id: str) -> int | None:
        for position, item in enumerate(rnd.bundle):
            if position in rnd.used_positions or position >= len(rnd.positions):
                continue
            call = item.get("tool_call") if isinstance(item, Mapping) else None
            if isinstance(call, Mapping) and str(call.get("tool_id") or "").strip() == tool_id:
                rnd.used_positions.add(position)
                return rnd.positions[position]
        return None

    def _tool_result(self, env: _Env, out: list[dict[str, Any]]) -> None:
        data = env.data
        iteration = _iteration(data.get("iteration"))
        tool_id = _text(data.get("tool_id"), "tool_id")
        call_id = _text(data.get("tool_call_id"), "tool_call_id")
        known = self.calls.get(call_id)
        reported_index = data.get("action_index")
        attempt: int | None = None
        if _is_index(reported_index):
            rnd, index = self._round(env, iteration, out), reported_index
        elif known is not None and known[0] in self.rounds:
            rnd, index, attempt = self.rounds[known[0]], known[1], known[2]
        else:
            rnd = self._round(env, iteration, out)
            index = self._slot_index(env.turn_id, iteration, call_id)
        duration = data.get("duration_ms")
        if isinstance(duration, bool) or not isinstance(duration, int | float) or duration < 0:
            duration = 0
        status = "error" if str(env.event.get("status")) == "error" else "ok"
        code = _error_field(data.get("error_code")) if status == "error" else None
        if code == MISSING_OUTPUT and duration >= self.isolation_limit_ms:
            out.append(self._inferred_timeout(env, rnd, attempt, index, tool_id, call_id, duration))
            return
        extra: dict[str, Any] = {}
        if code is not None:
            extra["error_code"] = code
        message = _tool_error_message(data.get("error")) if status == "error" else None
        if message is not None:
            extra["error_message"] = message
        out.append(
            env.make(
                rnd,
                TOOL_FINISHED,
                inferred=not _is_index(reported_index),
                attempt=attempt,
                action_index=index,
                tool_id=tool_id,
                tool_call_id=call_id,
                status=status,
                duration_ms=duration,
                **extra,
            )
        )

    def _inferred_timeout(
        self,
        env: _Env,
        rnd: _Round,
        attempt: int | None,
        index: int | None,
        tool_id: str,
        call_id: str,
        duration: float,
    ) -> dict[str, Any]:
        """An isolated call KDCube's subprocess runner killed at its limit: the runtime then
        finds no result file and publishes ``missing_tool_output`` (dropping its own timeout
        error), so a ``missing_tool_output`` at or past the limit is the timeout. It replaces
        the error ``tool.finished`` (never both: tool health would count the call twice)."""
        limit = self.isolation_limit_ms
        return env.make(
            rnd,
            TOOL_TIMEOUT,
            attempt=attempt,
            action_index=index,
            tool_id=tool_id,
            tool_call_id=call_id,
            limit_ms=limit,
            elapsed_ms=duration,
            async_alternative=None,
            runtime_error_code=MISSING_OUTPUT,
            inferred_from=(
                f"timeout: the runtime reported {MISSING_OUTPUT} after {duration:g} ms, at or "
                f"past its isolation limit of {limit:g} ms (its subprocess runner kills the call "
                "there and the result file is then missing)"
            ),
        )

    def _rejected(self, env: _Env, out: list[dict[str, Any]]) -> None:
        data = env.data
        iteration = _iteration(data.get("iteration"))
        error = data.get("error")
        code = error.get("code") if isinstance(error, Mapping) else None
        code = _text(code, "error.code")
        rnd = self._round(env, iteration, out)
        rnd.runtime_rejected = True
        self._prove(env, "v3", V3_BY_REJECTION)
        raw_index = data.get("action_index")
        index = (
            raw_index if isinstance(raw_index, int) and not isinstance(raw_index, bool) else None
        )
        if index is not None and index < 0:
            index = None
        tool_id = data.get("tool_id")
        tool_id = tool_id if isinstance(tool_id, str) and tool_id.strip() else None
        extra = data.get("extra")
        extra = dict(extra) if isinstance(extra, Mapping) else None
        # What was rejected: a tool call, or (no tool id) the action the overseer names in its
        # extra, e.g. a final answer ("complete").
        named = (extra or {}).get("action")
        action = "call_tool" if tool_id is not None else named if isinstance(named, str) else None
        observed: dict[str, Any] | None = None
        if action is not None and (index is None or index not in rnd.observed):
            notes: dict[str, Any] = {}
            if tool_id is None:
                notes["inferred_from"] = (
                    f"the rejected action is {action[:MAX_TEXT]!r}: the rejection names no "
                    "tool, and its extra.action says which action it was"
                )
            observed = env.make(
                rnd,
                ACTION_OBSERVED,
                action_index=index,
                action=action[:MAX_TEXT],
                tool_id=tool_id,
                params_summary=data.get("params"),
                **notes,
            )
        rejected = env.make(
            rnd,
            ACTION_REJECTED,
            inferred=index is None,
            action_index=index,
            tool_id=tool_id,
            code=code,
            extra=extra,
        )
        if index is None:
            # Held until the decision step says whether the round had a bundle (see _decision).
            rnd.rejected_whole += 1
            rnd.unindexed.append((observed, rejected) if observed else (None, rejected))
            return
        rnd.rejected.add(index)
        if observed is not None:
            rnd.observed.add(index)
            out.append(observed)
        out.append(rejected)

    def _decision(self, env: _Env, out: list[dict[str, Any]]) -> None:
        match = DECISION_STEP.match(str(env.event.get("step") or ""))
        if match is None:
            raise _Skip("decision step without react(N).decision")
        rnd = self._round(env, int(match.group(1)), out)
        data = env.data
        if self._v2_decision(env, rnd, out):
            return
        bundle = data.get("bundle")
        if isinstance(bundle, list):
            items = [item for item in bundle if isinstance(item, Mapping)]
        elif isinstance(data.get("action"), str):
            items = [data]
        else:
            items = []
        single = not isinstance(bundle, list)
        if single and rnd.unindexed:
            # One action in the round (no bundle): the rejection without index was about
            # action 0; the decision step then shows what the runtime does instead (its retry
            # or exit), not a second action.
            self._place_unindexed(rnd, out)
            items = []
        rnd.decided = True
        rnd.bundle = items
        free = (i for i in range(MAX_SLOTS + len(items)) if i not in rnd.rejected)
        rnd.positions = [next(free) for _ in items]
        restream = self._restream(env, rnd, out) if "actions" not in rnd.exact else None
        if "generation" not in rnd.exact:
            out.append(env.make(rnd, GENERATION_FINISHED, **self._code_complete(rnd)))
        # A bundle's rejection without index: the index stays unknown.
        out.extend(rejected for _observed, rejected in rnd.unindexed)
        rnd.unindexed.clear()
        if "actions" in rnd.exact:
            return
        for position, item in enumerate(items):
            action = str(item.get("action") or "").strip()
            if action == "call_tool":
                # Its tool event tells it; an early start already did (and took that slot).
                if rnd.positions[position] in rnd.observed:
                    rnd.used_positions.add(position)
                continue
            index = rnd.positions[position]
            rnd.used_positions.add(position)
            notes = {"inferred_from": restream} if restream else {}
            out.extend(self._observe(env, rnd, index, action[:MAX_TEXT], None, **notes))

    # --- v2 (KDCube's default react agent, issue 37 §0) ----------------------------------------

    def _v2_decision(self, env: _Env, rnd: _Round, out: list[dict[str, Any]]) -> bool:
        """A decision step of v2's protocol failure (:func:`v2_protocol_failure`) in a round with
        no runtime rejection (v3 publishes ``react.tool.rejected`` before the same step): the
        action the model wrote is observed and rejected with v2's code, and then either the
        model is asked again (the round's outcome ``retried``; the re-ask is the next iteration,
        as the runtime counts it) or the turn exits (the round ``failed`` with that code and the
        exit's text). False: not a v2 failure, mapped as any decision step."""
        failure = v2_protocol_failure(env.data)
        if failure is None or rnd.runtime_rejected or "actions" in rnd.exact:
            return False
        kind, code = failure
        self._prove(env, "v2", V2_BY_PROTOCOL)
        rnd.decided = True
        if "generation" not in rnd.exact:
            out.append(env.make(rnd, GENERATION_FINISHED, **self._code_complete(rnd)))
        if kind == "exit":
            rnd.failure = {"error_code": code}
            message = _error_field(env.data.get("final_answer"))
            if message is not None:
                rnd.failure["error_message"] = message
            note = (
                f"v2's protocol retries ran out ({code}): the decision node exits the turn "
                "(its decision step is action exit); the turn failed"
            )
        else:
            note = (
                f"v2 rejected the decision ({code}) and asks the model again (its decision step's "
                f"notes: {str(env.data.get('notes'))[:MAX_TEXT]!r}; the re-ask is the next "
                "iteration)"
            )
        extra: dict[str, Any] = {
            "react_version": "v2",
            "then": "exit" if kind == "exit" else "retry",
        }
        parser_error = _v2_parser_error(env.data)
        if parser_error is not None:
            extra["parser_error"] = parser_error
        rnd.rejected_whole += 1
        actions = _v2_written_actions(env.data)
        if not actions:
            # Nothing of what the model wrote is published: one rejection, index unknown.
            out.append(
                env.make(
                    rnd,
                    ACTION_REJECTED,
                    action_index=None,
                    tool_id=None,
                    code=code,
                    extra=extra,
                    inferred_from=note,
                )
            )
            return True
        for index, (word, tool_id) in enumerate(actions):
            rnd.rejected.add(index)
            rnd.observed.add(index)
            out.append(
                env.make(
                    rnd,
                    ACTION_OBSERVED,
                    action_index=index,
                    action=word,
                    tool_id=tool_id,
                    params_summary=None,
                    inferred_from=note,
                )
            )
            out.append(
                env.make(
                    rnd,
                    ACTION_REJECTED,
                    action_index=index,
                    tool_id=tool_id,
                    code=code,
                    extra=extra,
                    inferred_from=note,
                )
            )
        return True

    def _place_unindexed(self, rnd: _Round, out: list[dict[str, Any]]) -> None:
        note = (
            "action 0: the runtime's rejection carries no index, and the decision step has no "
            "bundle, so the round had one action"
        )
        for observed, rejected in rnd.unindexed:
            for event in (observed, rejected):
                if event is not None:
                    event["action_index"] = 0
                    event["inferred_from"] = note
                    out.append(event)
        rnd.unindexed.clear()
        rnd.rejected.add(0)
        rnd.observed.add(0)

    def _restream(self, env: _Env, rnd: _Round, out: list[dict[str, Any]]) -> str | None:
        """A decision that puts another tool (or a final answer) on a slot an early start took
        came from a later stream of the round (a provider re-stream, which publishes nothing of
        its own): its actions are placed in attempt 1, each observed and accepted, so none is
        hidden behind the early start. The note saying so, or None (no re-stream)."""
        clash = _clash(rnd)
        if clash is None:
            return None
        index, what, early_tool = clash
        note = (
            f"re-stream: the decision step puts {what} at action {index}, where "
            f"{early_tool} had started early, so the decision came from a later stream; "
            "its actions are shown as attempt 1 (the attempt number is inferred)"
        )
        rnd.attempt, rnd.observed, rnd.used_positions = 1, set(), set()
        for position, item in enumerate(rnd.bundle):
            action = str(item.get("action") or "").strip()
            if action != "call_tool":
                continue  # final answers are observed below, as in any decision step
            index = rnd.positions[position]
            rnd.observed.add(index)
            rnd.accepted += 1
            tool_id = _bundle_tool(item)
            out.append(
                env.make(
                    rnd,
                    ACTION_OBSERVED,
                    action_index=index,
                    action=action,
                    tool_id=tool_id,
                    inferred_from=note,
                )
            )
            out.append(
                env.make(
                    rnd,
                    ACTION_ACCEPTED,
                    action_index=index,
                    tool_id=tool_id,
                    strategy=None,
                    inferred_from=note,
                )
            )
        return note


V3_BY_REJECTION: Final = (
    "react v3: the runtime published react.tool.rejected in this turn (v2 never does; its "
    "protocol failures show only in its decision step)"
)
V3_BY_EARLY_START: Final = (
    "react v3: a tool of this turn started early (its tc_ slot id before the decision step); "
    "v2 never starts a tool early"
)
V3_BY_INSTANCE: Final = (
    "react v3: a decision delta of this turn carries a multi-action instance suffix (.iK), which "
    "v2 never writes"
)
V2_BY_PROTOCOL: Final = (
    "react v2: a decision step of this turn re-asked or exited for a protocol failure with no "
    "react.tool.rejected before it (v3 publishes one)"
)
V2_SILENT_RETRY: Final = (
    "v2 re-asks without a decision step when _validate_decision fails (e.g. "
    "final_answer_with_tool_call): the round streamed, published no decision and the next "
    "iteration began"
)


def v2_protocol_failure(data: Mapping[str, Any]) -> tuple[str, str] | None:
    """``("retry", code)`` or ``("exit", code)`` when a decision step is v2's answer to a protocol
    failure (:data:`V2_RETRY_NOTES`, :data:`V2_EXIT_CODES`, :data:`V2_VALIDATION_EXIT`), else
    None. The exit after a failed ``_validate_decision`` names no code: ``decision_invalid``
    (the runtime's session-log word for it) stands in."""
    notes = str(data.get("notes") or "").strip()
    retry = V2_RETRY_NOTES.match(notes)
    if retry is not None:
        return "retry", retry.group(1)
    if str(data.get("action") or "").strip() != "exit":
        return None
    if notes in V2_EXIT_CODES:
        return "exit", notes
    if not notes and str(data.get("final_answer") or "").strip() == V2_VALIDATION_EXIT:
        return "exit", "decision_invalid"
    return None


#: The most of the model's raw text read for the actions it wrote (a v2 schema error).
MAX_RAW: Final = 65536
_ACTION_CHANNEL: Final = re.compile(r"<channel:action>(.*?)</channel:action>", re.S)


def _v2_parser_error(data: Mapping[str, Any]) -> str | None:
    """The first line of the stream's parse error a v2 schema-error step carries (``log.error``:
    ``multiple_channel_instances:2``, the action model's validation error, …)."""
    log = data.get("log")
    error = log.get("error") if isinstance(log, Mapping) else None
    if not isinstance(error, str) or not error.strip():
        return None
    return _error_field(error.strip().splitlines()[0][:MAX_TEXT])


def _v2_written_actions(data: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """What the model wrote in the rejected decision, as (action, tool id) per action: the call
    the node kept (``tool_call_invalid``, ``tool_signature_red``: the decision names its tool),
    else each ``<channel:action>`` of the raw text a schema-error step carries (v2 publishes the
    stream's packet: ``raw``, ``log.error``); empty when neither says."""
    tool_id = _bundle_tool(data)
    if tool_id is not None:
        return [("call_tool", tool_id)]
    raw = data.get("raw")
    if not isinstance(raw, str):
        return []
    found: list[tuple[str, str | None]] = []
    for text in _ACTION_CHANNEL.findall(raw[:MAX_RAW])[:MAX_SLOTS]:
        try:
            item = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            item = None
        if not isinstance(item, Mapping):
            found.append(("call_tool", None))
            continue
        word = item.get("action")
        word = word.strip()[:MAX_TEXT] if isinstance(word, str) and word.strip() else "call_tool"
        found.append((word, _bundle_tool(item)))
    return found


def _v2_silent_retry(rnd: _Round) -> bool:
    """A round that streamed and published nothing else before the next iteration began: v2's
    re-ask after a failed ``_validate_decision`` (it returns before its decision step)."""
    return (
        not rnd.decided
        and not rnd.accepted
        and not rnd.observed
        and not rnd.runtime_rejected
        and not rnd.exact
    )


def _clash(rnd: _Round) -> tuple[int, str, str] | None:
    """The first action of the decision that contradicts an early start at its slot: another
    tool, or an action that is no tool call at all (a final answer; with no bundle the decision
    is one action at index 0). Its index, what it is, and the tool that started early there."""
    for position, item in enumerate(rnd.bundle):
        index = rnd.positions[position]
        early_tool = rnd.early_tools.get(index)
        if early_tool is None:
            continue
        action = str(item.get("action") or "").strip()
        tool_id = _bundle_tool(item)
        if action != "call_tool" and action:
            return index, f"a final answer ({action[:MAX_TEXT]})", early_tool
        if tool_id is not None and tool_id != early_tool:
            return index, tool_id, early_tool
    return None


def _error_field(value: Any) -> str | None:
    """An error text as the protocol carries it: a non-empty string, control characters shown
    escaped (``\\n``), at most :data:`MAX_ERROR_TEXT` characters; else None."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = CONTROL_CHARS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), value)
    return text[: MAX_ERROR_TEXT - 1] + "…" if len(text) > MAX_ERROR_TEXT else text


def _tool_error_message(error: Any) -> str | None:
    """The message of a tool result's ``error`` (the runtime's ``_tool_error_payload``: the
    handler's error, or ``{"items": [...]}`` with the result rows' errors, the first one told)."""
    if isinstance(error, Mapping):
        items = error.get("items")
        if "message" not in error and isinstance(items, list) and items:
            return _tool_error_message(items[0])
        return _error_field(error.get("message"))
    return _error_field(error)


def _turn_error(data: Mapping[str, Any]) -> dict[str, str]:
    """What a ``chat.error`` says about why the turn failed (``ChatCommunicator.error``:
    ``data.error`` the message; the workflow's handlers add ``error_type``, the exception's
    class or the phase error's code)."""
    found: dict[str, str] = {}
    code = _error_field(data.get("error_type"))
    message = _error_field(data.get("error")) or _error_field(data.get("error_message"))
    if code is not None:
        found["error_code"] = code
    if message is not None:
        found["error_message"] = message
    return found


def _bundle_tool(item: Mapping[str, Any]) -> str | None:
    call = item.get("tool_call")
    tool_id = call.get("tool_id") if isinstance(call, Mapping) else None
    return tool_id.strip()[:MAX_TEXT] if isinstance(tool_id, str) and tool_id.strip() else None
