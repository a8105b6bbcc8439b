"""The live stream: what changed, rendered once per change and fanned out to every viewer.

Ingest sends one group message per batch, ``{"type": "rounds.changed", "first", "version",
"rounds": [[pk, facts before, facts after], …]}`` (versions ``first``..``version`` are the batch's,
one per round, contiguous over all batches). Every viewer applies the facts to its counters (a few
additions), and takes its cards from :func:`fragments`, which reads and renders the batch's rounds
once per process whatever the number of viewers. A viewer that notices a gap in the versions (a
message the layer dropped, or a viewer that fell far behind) catches up with :func:`catch_up`:
every round changed since, each once at its latest version (versions of one round coalesce; no
round is left out), sent :data:`MAX_CARDS` cards per message, with its counters counted again.
Only a viewer more than :data:`CATCH_UP_MAX` rounds behind (a page reconnecting after a long
time) gets the newest of them, with the number left out stated in the message.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from channels.db import database_sync_to_async
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from observe.domain.facts import RoundFacts
from observe.live.cards import card_for
from observe.live.counters import Counters, Tally, admits, tally_for
from observe.models import Round
from observe.selectors import KIND_COLUMNS, RoundFilter, latest_version
from observe.services import RoundChange

#: Most cards the live page holds (and the most one stream message carries).
MAX_CARDS: Final = 200
#: Most rounds one catch-up sends (in messages of :data:`MAX_CARDS`); a viewer further behind
#: gets the newest this many and is told how many were left out.
CATCH_UP_MAX: Final = 10 * MAX_CARDS
#: Batches whose rendered cards each process keeps (viewers of one batch ask within moments).
KEPT_BATCHES: Final = 64


@dataclass(frozen=True)
class Fragment:
    """One changed round, rendered: its card's HTML and the facts filters test."""

    pk: int
    version: int
    facts: RoundFacts
    html: SafeString


#: Cards rendered, by (row, version, updated): a round's card is rendered once per change,
#: whether the stream or the page asks first.
_cards: OrderedDict[tuple[int, int, object], SafeString] = OrderedDict()
KEPT_CARDS: Final = 4 * MAX_CARDS


def card_html(row: Round) -> SafeString:
    """The card of a row as HTML, rendered once per version of the round."""
    key = (row.pk, row.version, row.updated_at)
    html = _cards.get(key)
    if html is None:
        html = mark_safe(  # noqa: S308 (rendered by the autoescaping template)
            render_to_string("observe/round_card.html#card", {"card": card_for(row)})
        )
        _cards[key] = html
        while len(_cards) > KEPT_CARDS:
            _cards.popitem(last=False)
    return html


def cards_html(rows: Sequence[Round]) -> list[SafeString]:
    return [card_html(row) for row in rows]


def render_fragments(
    rows: Sequence[Round], known: Mapping[int, RoundFacts] | None = None
) -> list[Fragment]:
    """Each row's card (rendered once per version) and the facts filters test: ``known`` ones
    (the batch's message carries them, computed once at ingest), else read from the row (a
    catch-up has no message)."""
    counters = tuple(KIND_COLUMNS.values())
    fragments = []
    for row in rows:
        facts = (known or {}).get(row.pk) or RoundFacts.of(
            row.agent,
            row.started_at,
            [getattr(row, column) for column in counters],
            row.assembly.get("tools", []) if row.assembly else [],
            row.drift,
        )
        fragments.append(Fragment(row.pk, row.version, facts, card_html(row)))
    return fragments


def _changed_between(first: int, last: int, known: Mapping[int, RoundFacts]) -> list[Fragment]:
    rows = Round.objects.filter(version__gte=first, version__lte=last).order_by("version")
    return render_fragments(list(rows), known)


_changed_between_async = database_sync_to_async(_changed_between)
_rendered: OrderedDict[tuple[int, str], asyncio.Future[list[Fragment]]] = OrderedDict()


async def fragments(
    first: int, last: int, stamp: str, known: Mapping[int, RoundFacts] | None = None
) -> list[Fragment]:
    """The rounds of one batch (versions ``first``..``last``), read and rendered once per
    process: the first viewer to ask does it, the others wait for the same result. A round
    changed again since is left out here: the later batch brings it. ``known``: the batch's
    facts after the change, by round (from its message)."""
    loop = asyncio.get_running_loop()
    key = (first, stamp)
    future = _rendered.get(key)
    if future is None or future.get_loop() is not loop:
        future = loop.create_future()
        _rendered[key] = future
        while len(_rendered) > KEPT_BATCHES:
            _rendered.popitem(last=False)
        try:
            future.set_result(await _changed_between_async(first, last, known or {}))
        except BaseException as exc:
            _rendered.pop(key, None)
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters re-raise it
            raise
    return await asyncio.shield(future)


_CARDS_MARK: Final = "@@traitdeck-cards@@"
_SEQ_MARK: Final = "@@traitdeck-seq@@"
#: The ``stream`` partial rendered around placeholders, per (counters, caught_up): viewers with
#: the same counters share one render; each fills in its cards and sequence number.
_frames: OrderedDict[tuple[Counters, int], str] = OrderedDict()


def stream_message(
    html: Sequence[SafeString], counters: Counters, *, seq: int, caught_up: int = 0
) -> str:
    """One websocket message: cards appended to ``#incoming``, ``#counters`` and ``#live-seq``
    replaced (``data-seq`` is ``seq``; ``caught_up``: changes left out of a catch-up)."""
    key = (counters, caught_up)
    frame = _frames.get(key)
    if frame is None:
        frame = render_to_string(
            "observe/live.html#stream",
            {
                "card_html": [mark_safe(_CARDS_MARK)],  # noqa: S308 (a constant)
                "counters": counters,
                "oob": True,
                "seq": _SEQ_MARK,
                "caught_up": caught_up,
            },
        )
        _frames[key] = frame
        while len(_frames) > KEPT_BATCHES:
            _frames.popitem(last=False)
    return frame.replace(_SEQ_MARK, str(seq)).replace(_CARDS_MARK, "".join(html))


@dataclass(frozen=True)
class CatchUp:
    """What a viewer that fell behind gets: every round changed since its version, once each at
    its latest version, oldest change first (at most :data:`CATCH_UP_MAX`: ``skipped`` more,
    older, were left out), its counters counted afresh."""

    version: int
    tally: Tally
    fragments: list[Fragment]
    skipped: int

    def messages(self) -> list[list[Fragment]]:
        """The fragments in stream messages of at most :data:`MAX_CARDS` cards (one, maybe
        empty, when there are none)."""
        found = self.fragments
        return [found[i : i + MAX_CARDS] for i in range(0, len(found), MAX_CARDS)] or [[]]


def catch_up(round_filter: RoundFilter, since: int) -> CatchUp:
    # Read the version first: every change up to it is committed, so the queries below see it
    # (versions are handed out under a lock held until commit, in commit order).
    version = latest_version()
    tally = tally_for(round_filter)
    changed = round_filter.apply(Round.objects.filter(version__gt=since, version__lte=version))
    # A round's row holds its latest version only: one row per changed round, coalesced.
    rows = list(changed.order_by("-version")[: CATCH_UP_MAX + 1])
    skipped = 0
    if len(rows) > CATCH_UP_MAX:
        skipped = changed.count() - CATCH_UP_MAX
        rows = rows[:CATCH_UP_MAX]
    rows.reverse()
    return CatchUp(version, tally, render_fragments(rows), skipped)


def matching(round_filter: RoundFilter, found: Sequence[Fragment], since: int) -> list[Fragment]:
    """The fragments a viewer with this filter shows, of versions after ``since``."""
    return [f for f in found if f.version > since and admits(round_filter, f.facts)]


def changes_of(message: dict[str, Any]) -> list[RoundChange]:
    """The rounds a ``rounds.changed`` message says changed, read back from the wire."""
    return [RoundChange.from_wire(wire) for wire in message.get("rounds", [])]


def apply_change(tally: Tally, changes: Sequence[RoundChange]) -> None:
    """Fold one batch's facts into a viewer's counters."""
    for entry in changes:
        tally.apply(entry.pk, entry.before, entry.after)
