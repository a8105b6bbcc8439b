"""The words every app shares, defined once: event types, round outcomes, the kinds of round worth
a second look, trait keys and values, and the limits on text and numbers.

It sits below everything (no Django, no app) so that the bridge, observe, the impact report, the
templates' chips and the policy engine read the same spelling instead of each re-spelling it:
adding a kind of round, say, is one row of :data:`ROUND_KINDS` (plus its colour in the CSS, its
mark's shape ``templates/observe/kinds/<name>.svg`` and what its chip says of an action,
``observe.live.cards``); the Round model's counter columns, the ``has`` filter, the live counters,
the history chart and the API's ``counts`` derive theirs from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

# -- Event types of protocol v1 (DESIGN §4) -------------------------------------------------------
ROUND_STARTED: Final = "round.started"
ACTION_OBSERVED: Final = "action.observed"
ACTION_ACCEPTED: Final = "action.accepted"
ACTION_REJECTED: Final = "action.rejected"
TOOL_EARLY_STARTED: Final = "tool.early_started"
TOOL_STARTED: Final = "tool.started"
TOOL_FINISHED: Final = "tool.finished"
LEDGER_DEDUP: Final = "ledger.dedup"
TOOL_TIMEOUT: Final = "tool.timeout"
GENERATION_FINISHED: Final = "generation.finished"
ROUND_FINISHED: Final = "round.finished"

#: Every event type of protocol v1, in the order of the §4 table.
EVENT_TYPES: Final = (
    ROUND_STARTED,
    ACTION_OBSERVED,
    ACTION_ACCEPTED,
    ACTION_REJECTED,
    TOOL_EARLY_STARTED,
    TOOL_STARTED,
    TOOL_FINISHED,
    LEDGER_DEDUP,
    TOOL_TIMEOUT,
    GENERATION_FINISHED,
    ROUND_FINISHED,
)

# -- Round outcomes ------------------------------------------------------------------------------
OUTCOME_OK: Final = "ok"
#: The round ended well after a re-ask (a rejection, a protocol error the model corrected).
OUTCOME_RETRIED: Final = "retried"
OUTCOME_FAILED: Final = "failed"
#: What a ``round.finished`` event may say of the round.
OUTCOMES: Final = (OUTCOME_OK, OUTCOME_RETRIED, OUTCOME_FAILED)
#: A round with no outcome yet (the ``outcome=`` filter's word for it, DESIGN §6).
IN_PROGRESS: Final = "in_progress"
#: Every ``outcome=`` value of the listings: the outcomes, then in progress.
OUTCOME_FILTERS: Final = (*OUTCOMES, IN_PROGRESS)


# -- The kinds of round worth a second look -------------------------------------------------------
REJECTION: Final = "rejection"
EARLY: Final = "early"
DEDUP: Final = "dedup"
TIMEOUT: Final = "timeout"


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
        REJECTION,
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
        EARLY,
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
        DEDUP,
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
        TIMEOUT,
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
#: The Round columns counting a round's actions of each kind, in table order.
KIND_COUNTERS: Final[tuple[str, ...]] = tuple(kind.counter for kind in ROUND_KINDS)
#: Every ``counts`` key of a round, ``actions`` first.
COUNT_KEYS: Final[tuple[str, ...]] = ("actions", *KIND_COUNTERS)
#: The kinds a policy can predict from a round's actions (DESIGN §2): a timeout is the tool's,
#: not the policy's, so impact and replay count only these.
PREDICTED_KINDS: Final[tuple[str, ...]] = (REJECTION, EARLY, DEDUP)

# -- Trait keys and values, as the YAML names them (DESIGN §2.1) ----------------------------------
STRATEGY: Final = "strategy"
EXECUTION: Final = "execution"
EXPLORATION: Final = "exploration"
EXPLOITATION: Final = "exploitation"
NEUTRAL: Final = "neutral"
UNKNOWN: Final = "unknown"
STRATEGY_VALUES: Final = (EXPLORATION, EXPLOITATION, NEUTRAL, UNKNOWN)
CONCRETE_STRATEGIES: Final = (EXPLORATION, EXPLOITATION, NEUTRAL)
#: The only execution mapping that makes a call start while the model is still generating.
EARLY_PROFILE: Final[Mapping[str, str]] = {
    "trigger": "tool_call_complete",
    "concurrency": "parallel_with_generation",
    "result_dependency": "detached",
    "replay": "at_most_once_per_round",
}

# -- Limits on text and numbers -------------------------------------------------------------------
#: The longest name (agent, turn id, tool id, rule code…) an event carries: keeps a stored event
#: small and indexable; the runtime never comes near it, and the bridge cuts to it.
MAX_TEXT: Final = 200
#: The longest ``error_code`` / ``error_message`` a failed round or call may carry (a runtime's
#: error text, not a log: longer is refused, never cut).
MAX_ERROR_TEXT: Final = 2000
#: The largest iteration, attempt or index an event may hold: a 32-bit signed column.
MAX_EVENT_INT: Final = 2**31 - 1
#: Unicode's control characters (category ``Cc``, which the standard never extends): C0, DEL
#: and C1. One regex search per name instead of a category lookup per character (ingest checks
#: three names per event); a test compares it with ``unicodedata`` over every code point.
CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: The deepest nesting a stored JSON value may have: far past any policy, manifest or round
#: (about ten levels), far short of what exhausts the stack of the code that encodes or shows it.
MAX_DEPTH: Final = 64
#: Two integer bounds, for two jobs. What is *stored* as JSON (events, manifests) may hold any
#: integer the 64 bits databases and JSON clients read:
MAX_STORED_INT: Final = 2**63 - 1
#: What people *type* (a number in a form, a query, a policy document the engine computes with)
#: has at most 18 digits, a count a reader can still check by eye and that always fits in 64 bits.
MAX_DIGITS: Final = 18
#: The largest magnitude (exclusive) of an integer a policy or request may hold.
MAX_MAGNITUDE: Final = 10**MAX_DIGITS
