"""The bridge's waiting room: mapped events that Traitdeck has not taken yet, grouped by round.

KDCube publishes at most once and Redis cuts off a subscriber that falls behind, so the bridge
keeps reading while Traitdeck is slow or away and holds the events here. The room is bounded:
when it is full the **oldest rounds are dropped whole** (counted, never half a round), and a
round once dropped stays dropped (its later events are dropped too, so Traitdeck never stores a
round that lacks its beginning). Events handed out for posting ("in flight") are the poster's
until it says they are done with; a round with events in flight is never dropped, and a round
already partly posted is dropped only when no round that was never posted is left to drop.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

RoundKey = tuple[str, str, int]

#: How many dropped (and posted) rounds are remembered: a dropped round's later events are
#: dropped on arrival.
REMEMBERED_DROPS: Final = 10_000


def round_key(event: Mapping[str, Any]) -> RoundKey:
    return (str(event["agent"]), str(event["turn_id"]), int(event["iteration"]))


@dataclass
class Drops:
    rounds: int = 0
    events: int = 0


class RoundBuffer:
    """Events waiting to be posted, oldest round first, at most ``limit`` of them."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the buffer must hold at least one event")
        self.limit = limit
        self._rounds: OrderedDict[RoundKey, list[dict[str, Any]]] = OrderedDict()
        self._size = 0
        self._in_flight: dict[RoundKey, int] = {}
        self._dropped: OrderedDict[RoundKey, None] = OrderedDict()
        self._posted: OrderedDict[RoundKey, None] = OrderedDict()
        self.drops = Drops()

    def __len__(self) -> int:
        return self._size

    def add(self, events: Iterable[dict[str, Any]]) -> Drops:
        """Queue ``events``; returns what this call dropped to stay within the limit."""
        dropped = Drops()
        for event in events:
            key = round_key(event)
            if key in self._dropped:
                dropped.events += 1
                continue
            self._rounds.setdefault(key, []).append(event)
            self._size += 1
        while self._size > self.limit:
            free = [k for k in self._rounds if k not in self._in_flight]
            victim = next((k for k in free if k not in self._posted), free[0] if free else None)
            if victim is None:
                break  # everything waiting belongs to rounds in flight: over the limit briefly
            lost = self._rounds.pop(victim)
            self._size -= len(lost)
            dropped.rounds += 1
            dropped.events += len(lost)
            _remember(self._dropped, victim)
        self.drops.rounds += dropped.rounds
        self.drops.events += dropped.events
        return dropped

    def take(self, count: int) -> list[dict[str, Any]]:
        """Up to ``count`` events, oldest round first, handed to the poster (in flight)."""
        batch: list[dict[str, Any]] = []
        while self._rounds and len(batch) < count:
            key, events = next(iter(self._rounds.items()))
            part = events[: count - len(batch)]
            del events[: len(part)]
            if not events:
                del self._rounds[key]
            self._size -= len(part)
            self._in_flight[key] = self._in_flight.get(key, 0) + len(part)
            _remember(self._posted, key)
            batch.extend(part)
        return batch

    def done(self, batch: Iterable[Mapping[str, Any]]) -> None:
        """The poster is done with ``batch`` (stored, or refused for good)."""
        for event in batch:
            key = round_key(event)
            left = self._in_flight.get(key, 0) - 1
            if left > 0:
                self._in_flight[key] = left
            else:
                self._in_flight.pop(key, None)


def _remember(keys: OrderedDict[RoundKey, None], key: RoundKey) -> None:
    keys[key] = None
    keys.move_to_end(key)
    while len(keys) > REMEMBERED_DROPS:
        keys.popitem(last=False)
