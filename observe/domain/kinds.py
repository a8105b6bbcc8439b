"""The four kinds of round worth a second look, in one table.

Selectors (the ``has`` filter and its counter column), ingest (the Round columns and a round's
facts), the live page (labels, counters, chips), the history page (its chart series and chips),
the API (``has=`` and ``counts``), the simulator's summary, the action chips of cards and the
round page's timeline marks and legend all derive theirs from :data:`ROUND_KINDS`: adding a kind
is one row here, plus its column, its colour in the CSS, its mark's shape
(``templates/observe/kinds/<name>.svg``) and what its chip says of an action
(``observe.live.cards``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from observe.domain.events import ACTION_REJECTED, LEDGER_DEDUP, TOOL_EARLY_STARTED, TOOL_TIMEOUT


@dataclass(frozen=True)
class RoundKind:
    """``name``: the ``has`` value of filters and the API; ``event_type``: the event that marks
    an action of this kind; ``counter``: the ``counts`` key and Round column (actions of this
    kind in the round); ``label``: what people read ("3 rejections", "only rounds with …");
    ``tally``: the live counter's name (its element ids ``count-…``/``rate-…``); ``chip``: the
    CSS class of its chip and chart series; ``chip_text``: a chip's words for ``n`` actions;
    ``chart_label``: the history chart's series ("rounds with a rejection"); ``action_chip``:
    the words of the chip an action of this kind gets on a card and the round page ("started
    early"); ``legend``: the round page's timeline legend for its mark (the mark's shape is the
    template ``observe/kinds/<name>.svg``)."""

    name: str
    event_type: str
    counter: str
    label: str
    tally: str
    chip: str
    chip_text: Callable[[int], str]
    chart_label: str
    action_chip: str
    legend: str


ROUND_KINDS: Final[tuple[RoundKind, ...]] = (
    RoundKind(
        "rejection",
        ACTION_REJECTED,
        "rejections",
        "rejections",
        "rejections",
        "rejected",
        lambda n: f"{n} rejected",
        "with a rejection",
        action_chip="rejected",
        legend="rejected (cross)",
    ),
    RoundKind(
        "early",
        TOOL_EARLY_STARTED,
        "early_starts",
        "early starts",
        "early",
        "early",
        lambda n: f"{n} early",
        "with an early start",
        action_chip="started early",
        legend="early execution (hatched: overlaps generation)",
    ),
    RoundKind(
        "dedup",
        LEDGER_DEDUP,
        "dedups",
        "dedups",
        "dedups",
        "dedup",
        lambda n: f"{n} dedup" if n == 1 else f"{n} dedups",
        "with a dedup",
        action_chip="dedup",
        legend="ledger dedup (square)",
    ),
    RoundKind(
        "timeout",
        TOOL_TIMEOUT,
        "timeouts",
        "timeouts",
        "timeouts",
        "timeout",
        lambda n: f"{n} timed out",
        "with a timeout",
        action_chip="timeout",
        legend="timeout (triangle)",
    ),
)
#: ``name`` → kind, in table order.
KINDS: Final[Mapping[str, RoundKind]] = {kind.name: kind for kind in ROUND_KINDS}
#: Event type → kind.
KIND_OF_EVENT: Final[Mapping[str, RoundKind]] = {kind.event_type: kind for kind in ROUND_KINDS}
#: Every ``counts`` key of a round, ``actions`` first.
COUNT_KEYS: Final[tuple[str, ...]] = ("actions", *(kind.counter for kind in ROUND_KINDS))
