"""What the live view, the round page and the history show, split by job.

- :mod:`observe.live.filters`: the filters, from a query string and back into links;
- :mod:`observe.live.cards`: a round as a card (plain values; the templates render them);
- :mod:`observe.live.counters`: the counters, counted once and then kept from each change;
- :mod:`observe.live.stream`: each change rendered once and fanned out to the viewers;
- :mod:`observe.live.round_page`: the round page's events and actions table.

Views and the websocket consumer build their screens from here, so a card streamed over the
websocket is the card the page renders (one ``{% partialdef card %}``, one :class:`Card`). The
round page's timeline geometry is in :mod:`observe.timeline`.
"""

from __future__ import annotations

from observe.live.cards import (
    PARAMS_PREVIEW,
    ActionRow,
    AttemptRows,
    Card,
    Chip,
    action_chips,
    action_row,
    card_for,
    cards_for,
    early_lead,
    params_by_slot,
    params_text,
    safe_round_url,
    seconds,
)
from observe.live.counters import RATE_WINDOW, Counters, Tally, counters_for, tally_for
from observe.live.filters import (
    KIND_LABELS,
    ParsedFilter,
    filter_query,
    known_agents,
    parse_filter,
    parse_since,
)
from observe.live.round_page import ActionDetail, EventRow, action_details, event_rows
from observe.live.stream import MAX_CARDS

__all__ = [
    "KIND_LABELS",
    "MAX_CARDS",
    "PARAMS_PREVIEW",
    "RATE_WINDOW",
    "ActionDetail",
    "ActionRow",
    "AttemptRows",
    "Card",
    "Chip",
    "Counters",
    "EventRow",
    "ParsedFilter",
    "Tally",
    "action_chips",
    "action_details",
    "action_row",
    "card_for",
    "cards_for",
    "counters_for",
    "early_lead",
    "event_rows",
    "filter_query",
    "known_agents",
    "params_by_slot",
    "params_text",
    "parse_filter",
    "parse_since",
    "safe_round_url",
    "seconds",
    "tally_for",
]
