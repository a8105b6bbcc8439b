"""A round's facts: what a live viewer's counters and filter need to know of a round.

Ingest computes them once per round of a batch (before and after the batch) and sends them in
the channel message; each viewer folds them into its counters and tests its filter with them, so
no viewer reads the rounds again. On the wire (the channel layer; msgpack over Redis, which has
no tuples) they are a list: ``[agent, started_at ISO, one count per round kind, tool ids, drift
0/1]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.vocabulary import ROUND_KINDS


@dataclass(frozen=True, slots=True)
class RoundFacts:
    agent: str
    #: ISO 8601, as sent (``datetime.fromisoformat`` reads it back).
    started_at: str
    #: Actions of each kind, in :data:`core.vocabulary.ROUND_KINDS` order.
    counts: tuple[int, ...]
    tools: tuple[str, ...]
    #: Whether the runtime did not do what the round's version says.
    drift: bool = False

    @classmethod
    def of(
        cls,
        agent: str,
        started_at: datetime,
        counts: Sequence[int],
        tools: Iterable[str],
        drift: bool | None = None,
    ) -> RoundFacts:
        return cls(
            agent, started_at.isoformat(), tuple(counts), tuple(sorted(tools)), drift is True
        )

    def count(self, kind: str) -> int:
        """Actions of the kind named ``kind`` (a ``RoundKind.name``)."""
        return self.counts[_POSITION[kind]]

    def to_wire(self) -> list[Any]:
        return [self.agent, self.started_at, *self.counts, list(self.tools), int(self.drift)]

    @classmethod
    def from_wire(cls, wire: Sequence[Any]) -> RoundFacts:
        """Facts from a message (facts sent before drift existed have none: no drift)."""
        n = len(ROUND_KINDS)
        drift = bool(wire[3 + n]) if len(wire) > 3 + n else False
        return cls(
            wire[0], wire[1], tuple(int(c) for c in wire[2 : 2 + n]), tuple(wire[2 + n]), drift
        )


_POSITION = {kind.name: position for position, kind in enumerate(ROUND_KINDS)}
