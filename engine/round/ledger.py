"""The execution ledger: an early call runs at most once per round (DESIGN §2.5).

A provider retry re-streams the same round (same turn and iteration). Before an early call starts,
the runtime looks it up: first by its slot (turn, iteration, streamed index), then by its semantic
fingerprint (tool id + params) at any index, because a retry may reorder siblings. A hit means the
call already started (or finished, or failed) in this round and must not run again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Final, Literal

Status = Literal["running", "consumed", "failed"]
Match = Literal["slot", "fingerprint"]

STATUSES: Final = frozenset({"running", "consumed", "failed"})


def _slot_parts(turn_id: str, iteration: int, action_index: int) -> tuple[str, int, int]:
    # The runtime strips the turn and clamps negative numbers to 0 before hashing.
    return turn_id.strip(), max(0, int(iteration)), max(0, int(action_index))


def slot_id(turn_id: str, iteration: int, action_index: int) -> str:
    """The identity of one action slot: hex sha256 of ``"{turn}\\x1f{iteration}\\x1f{index}"``."""
    return _slot_id(*_slot_parts(turn_id, iteration, action_index))


@lru_cache(maxsize=4096)
def _slot_id(turn: str, iteration: int, index: int) -> str:
    # A pure function of the normalized slot, asked several times per action of a round.
    return hashlib.sha256(f"{turn}\x1f{iteration}\x1f{index}".encode()).hexdigest()


def action_key(turn_id: str, iteration: int, action_index: int) -> str:
    """The runtime's key for an early call: ``"early-tool:" + slot``."""
    return "early-tool:" + slot_id(turn_id, iteration, action_index)


def tool_call_id(turn_id: str, iteration: int, action_index: int) -> str:
    """The tool call id of an early call: ``"tc_"`` + the first 12 hex digits of the slot."""
    return "tc_" + slot_id(turn_id, iteration, action_index)[:12]


def fingerprint(tool_id: str, params: Any) -> str:
    """The semantic fingerprint of a call: sha256 of canonical JSON of tool id and params.

    Params that are not a mapping count as ``{}``; keys are sorted so sibling order and key order
    do not matter; non-ASCII text is kept as-is (UTF-8), not ``\\u`` escaped.
    """
    return hashlib.sha256(_canonical(tool_id.strip(), params).encode("utf-8")).hexdigest()


def _canonical(tool: str, params: Any) -> str:
    # The text the fingerprint hashes: two calls share a fingerprint exactly when these are equal.
    mapping = type(params) is dict or isinstance(params, Mapping)
    body = {"params": params if mapping else {}, "tool_id": tool}
    return _encode(body)


_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# ``json.dumps`` with these options makes the C encoder anew for every call (``iterencode``'s
# one-shot path); it is made once here with the same arguments — no circular check: params come
# from parsed JSON — so the text is ``json.dumps``'s (``test_ledger`` holds it to it). Without
# the C module, the encoder's own ``encode``.
_MAKE_C_ENCODER: Final = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODER: Final = (
    _MAKE_C_ENCODER(
        None,
        _ENCODER.default,
        json.encoder.encode_basestring,
        None,
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        True,
        False,
        True,
    )
    if _MAKE_C_ENCODER is not None
    else None
)


def _encode(body: dict[str, Any]) -> str:
    if _C_ENCODER is None:
        return _ENCODER.encode(body)
    return "".join(_C_ENCODER(body, 0))


@dataclass(frozen=True, slots=True)
class LedgerHit:
    """The record that makes a call a dedup: its action index, and how it matched."""

    index: int
    match: Match


#: Hits of the first action indexes, made once (a hit is never changed).
_SLOT_HITS: Final = tuple(LedgerHit(index, "slot") for index in range(32))
_FINGERPRINT_HITS: Final = tuple(LedgerHit(index, "fingerprint") for index in range(32))


class RoundLedger:
    """The ledger of one round (one turn and iteration): the one definition of its lookup.

    Before a call starts, the runtime looks it up: the record at its slot (whatever tool or
    params it holds), else a record of the same tool with the same fingerprint at any index (a
    provider retry may reorder siblings). Failed records count too: a failed call is not re-run
    in the same round. Canonical texts are worked out only when a lookup compares them.
    """

    __slots__ = ("calls", "_texts")

    def __init__(self) -> None:
        #: Action index → (tool id, params) of each recorded call (read-only outside).
        self.calls: dict[int, tuple[str, Any]] = {}
        # Canonical texts worked out, by the params object they were worked out for (held, so
        # its id stays its own): a call is looked up again at execution, and a recorded call is
        # compared with every later call of its tool.
        self._texts: dict[int, tuple[Any, str, str]] = {}

    def lookup(self, index: int, tool: str, params: Any) -> LedgerHit | None:
        """``index`` is the action index (0 or more), ``tool`` the stripped tool id; ``None``
        means run the call."""
        calls = self.calls
        if index in calls:
            return _SLOT_HITS[index] if index < len(_SLOT_HITS) else LedgerHit(index, "slot")
        text: str | None = None
        for recorded, (recorded_tool, recorded_params) in calls.items():
            if recorded_tool != tool:
                continue
            if text is None:
                text = self._text(tool, params)
            if self._text(recorded_tool, recorded_params) == text:
                if recorded < len(_FINGERPRINT_HITS):
                    return _FINGERPRINT_HITS[recorded]
                return LedgerHit(recorded, "fingerprint")
        return None

    def _text(self, tool: str, params: Any) -> str:
        texts = self._texts
        known = texts.get(id(params))
        if known is not None and known[0] is params and known[1] == tool:
            return known[2]
        text = _canonical(tool, params)
        texts[id(params)] = (params, tool, text)
        return text

    def fingerprint(self, tool: str, params: Any) -> str:
        """:func:`fingerprint` of a call (``tool`` stripped), from the text a lookup worked out."""
        return hashlib.sha256(self._text(tool, params).encode("utf-8")).hexdigest()

    def record(self, index: int, tool: str, params: Any) -> None:
        """Record a call that starts now; ``ValueError`` when its slot is taken."""
        if index in self.calls:
            raise ValueError(f"the slot of action {index} is already recorded")
        self.calls[index] = (tool, params)


@dataclass(frozen=True)
class LedgerRecord:
    """One early call started in a round. Identity fields are stored normalized (stripped turn and
    tool id, clamped numbers)."""

    turn_id: str
    iteration: int
    action_index: int
    tool_id: str
    fingerprint: str
    tool_call_id: str
    status: Status

    @property
    def slot(self) -> str:
        return slot_id(self.turn_id, self.iteration, self.action_index)

    @property
    def action_key(self) -> str:
        return "early-tool:" + self.slot


class Ledger:
    """In-memory ledger of one process. The guarantee is per round, not process-wide exactly-once.

    Early calls start from parallel tasks while the model streams, so every method holds a lock.
    """

    def __init__(self) -> None:
        self._records: dict[str, LedgerRecord] = {}
        self._rounds: dict[tuple[str, int], RoundLedger] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def records(self) -> list[LedgerRecord]:
        """Every record, in the order the calls started."""
        with self._lock:
            return list(self._records.values())

    def lookup(
        self, turn_id: str, iteration: int, action_index: int, tool_id: str, params: Any
    ) -> tuple[LedgerRecord, Match] | None:
        """The record that makes this call a dedup, and how it matched; ``None`` means run it.

        The slot wins whatever tool or params it holds; otherwise a record of the same turn and
        iteration with the same tool id and fingerprint, at any index. Failed records count too:
        a failed call is not re-run in the same round.
        """
        with self._lock:
            return self._lookup(turn_id, iteration, action_index, tool_id, params)

    def record(
        self, turn_id: str, iteration: int, action_index: int, tool_id: str, params: Any
    ) -> LedgerRecord:
        """Record a call that starts now (status ``running``).

        Raises ``ValueError`` when the slot is taken: recording over it would lose the first call.
        """
        with self._lock:
            return self._record(turn_id, iteration, action_index, tool_id, params)

    def claim(
        self, turn_id: str, iteration: int, action_index: int, tool_id: str, params: Any
    ) -> tuple[LedgerRecord, Match | None]:
        """Lookup and record in one step: ``(existing, match)`` on a dedup, ``(new, None)`` when
        the call should start. Two racing tasks can never both start the same call."""
        with self._lock:
            found = self._lookup(turn_id, iteration, action_index, tool_id, params)
            if found is not None:
                return found
            return self._record(turn_id, iteration, action_index, tool_id, params), None

    def finish(self, record: LedgerRecord, status: Status) -> LedgerRecord:
        """Set the final status of a recorded call and return the updated record."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of running, consumed, failed, not {status!r}")
        with self._lock:
            slot = record.slot
            current = self._records.get(slot)
            if current is None or current.tool_call_id != record.tool_call_id:
                raise KeyError(f"no ledger record for {record.tool_call_id}")
            updated = replace(current, status=status)
            self._records[slot] = updated
            return updated

    def _lookup(
        self, turn_id: str, iteration: int, action_index: int, tool_id: str, params: Any
    ) -> tuple[LedgerRecord, Match] | None:
        turn, it, index = _slot_parts(turn_id, iteration, action_index)
        ledger = self._rounds.get((turn, it))
        hit = ledger.lookup(index, tool_id.strip(), params) if ledger is not None else None
        if hit is None:
            return None
        return self._records[_slot_id(turn, it, hit.index)], hit.match

    def _record(
        self, turn_id: str, iteration: int, action_index: int, tool_id: str, params: Any
    ) -> LedgerRecord:
        slot = slot_id(turn_id, iteration, action_index)
        if slot in self._records:
            raise ValueError(f"the slot of action {action_index} is already recorded")
        turn, it, index = _slot_parts(turn_id, iteration, action_index)
        new = LedgerRecord(
            turn_id=turn,
            iteration=it,
            action_index=index,
            tool_id=tool_id.strip(),
            fingerprint=fingerprint(tool_id, params),
            tool_call_id="tc_" + slot[:12],
            status="running",
        )
        self._records[slot] = new
        self._rounds.setdefault((turn, it), RoundLedger()).record(index, new.tool_id, params)
        return new
