"""The four kinds of round worth a second look, in one table.

Selectors (the ``has`` filter and its counter column), the live page (labels, counters), the API
(``has=`` and ``counts``) and the simulator's summary all derive theirs from :data:`ROUND_KINDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from observe.domain.events import ACTION_REJECTED, LEDGER_DEDUP, TOOL_EARLY_STARTED, TOOL_TIMEOUT


@dataclass(frozen=True)
class RoundKind:
    """``name``: the ``has`` value of filters and the API; ``event_type``: the event that marks
    an action of this kind; ``counter``: the ``counts`` key and Round column (actions of this
    kind in the round); ``label``: what people read ("3 rejections", "only rounds with …")."""

    name: str
    event_type: str
    counter: str
    label: str


ROUND_KINDS: Final[tuple[RoundKind, ...]] = (
    RoundKind("rejection", ACTION_REJECTED, "rejections", "rejections"),
    RoundKind("early", TOOL_EARLY_STARTED, "early_starts", "early starts"),
    RoundKind("dedup", LEDGER_DEDUP, "dedups", "dedups"),
    RoundKind("timeout", TOOL_TIMEOUT, "timeouts", "timeouts"),
)
#: ``name`` → kind, in table order.
KINDS: Final[Mapping[str, RoundKind]] = {kind.name: kind for kind in ROUND_KINDS}
#: Event type → kind.
KIND_OF_EVENT: Final[Mapping[str, RoundKind]] = {kind.event_type: kind for kind in ROUND_KINDS}
#: Every ``counts`` key of a round, ``actions`` first.
COUNT_KEYS: Final[tuple[str, ...]] = ("actions", *(kind.counter for kind in ROUND_KINDS))
