"""The geometry of a round's timeline (the round page's SVG), computed from its timestamps.

The template draws what this module measures: every x and width is a number computed here, so
no markup is built in Python and every text (tool ids, reasons) reaches the SVG escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from core.vocabulary import (
    ACTION_ACCEPTED,
    ACTION_OBSERVED,
    ACTION_REJECTED,
    KINDS,
    LEDGER_DEDUP,
    TOOL_TIMEOUT,
)
from observe.domain.events import Event
from observe.domain.rounds import AssembledRound, Attempt, RoundAction
from observe.live import early_lead, seconds

TIMELINE_WIDTH: Final = 960.0
TIMELINE_LEFT: Final = 250.0
TIMELINE_RIGHT: Final = 20.0
LANE_HEIGHT: Final = 30.0
#: Each further line of a long lane label adds this much height (labels are never cut).
LABEL_LINE: Final = 16.0
#: Characters per label line in the label column (14-unit monospace text).
LABEL_CHARS: Final = 27
AXIS_HEIGHT: Final = 28.0
MIN_BAR: Final = 2.0
#: Candidate axis steps in seconds; the first giving at most ``MAX_TICKS`` ticks is used.
TICK_STEPS: Final = (0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600)
MAX_TICKS: Final = 10
#: The events of what the model streams (the generation lane of a dropped attempt ends there).
STREAM_EVENTS: Final = frozenset({ACTION_OBSERVED, ACTION_ACCEPTED, ACTION_REJECTED})


@dataclass(frozen=True)
class Scale:
    """Maps times onto x: ``start`` at ``left``, ``start + span_ms`` at ``left + width``."""

    start: datetime
    span_ms: float
    left: float = TIMELINE_LEFT
    width: float = TIMELINE_WIDTH - TIMELINE_LEFT - TIMELINE_RIGHT
    #: Where ``start`` lies after the round's start (a zoomed window); the axis counts from 0.
    offset_ms: float = 0.0

    def inside(self, ts: datetime) -> bool:
        offset = (ts - self.start) / timedelta(milliseconds=1)
        return 0.0 <= offset <= self.span_ms

    def overlaps(self, begin: datetime, end: datetime) -> bool:
        return self.inside(begin) or self.inside(end) or (begin < self.start < end)

    def x(self, ts: datetime) -> float:
        offset = (ts - self.start) / timedelta(milliseconds=1)
        clamped = min(max(offset, 0.0), self.span_ms)
        return round(self.left + clamped / self.span_ms * self.width, 1)

    def bar(self, begin: datetime, end: datetime) -> tuple[float, float]:
        """x and width of the bar from ``begin`` to ``end`` (never thinner than visible)."""
        x0 = self.x(begin)
        return x0, round(max(self.x(end) - x0, MIN_BAR), 1)


@dataclass(frozen=True)
class Mark:
    """A bar (``width`` > 0) or a point (``width`` 0) on a lane; ``title`` is its tooltip,
    ``kind`` its CSS class; ``shape``: the round kind (:data:`ROUND_KINDS`) whose template
    (``observe/kinds/<shape>.svg``) draws a point mark."""

    kind: str
    x: float
    title: str
    width: float = 0.0
    shape: str | None = None

    @property
    def is_point(self) -> bool:
        return self.width == 0


def _kind_mark(name: str, x: float, title: str) -> Mark:
    """The point mark of an action of the round kind ``name``."""
    return Mark(KINDS[name].chip, x, title, shape=name)


def label_lines(label: str, width: int = LABEL_CHARS) -> tuple[str, ...]:
    """A lane label in lines of at most ``width`` characters, broken after ``.``, ``_``, ``/``
    or a space where possible (inside a word only when a part is longer than a line)."""
    parts = re.findall(r"[^._/ ]*[._/ ]?", label)
    lines: list[str] = []
    line = ""
    for part in (p for p in parts if p):
        while len(part) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(part[:width])
            part = part[width:]
        if len(line) + len(part) > width and line:
            lines.append(line)
            line = ""
        line += part
    if line:
        lines.append(line)
    return tuple(text.rstrip() for text in lines) or ("",)


@dataclass(frozen=True)
class Lane:
    kind: str  # "generation" or "action"
    label: str
    title: str
    y: float
    attempt: int
    index: int | None = None
    unfinished: bool = False
    marks: tuple[Mark, ...] = ()

    @property
    def lines(self) -> tuple[str, ...]:
        return label_lines(self.label)

    @property
    def height(self) -> float:
        return lane_height(self.label)

    @property
    def mid(self) -> float:
        """Where the marks sit: the middle of the lane's first line."""
        return LANE_HEIGHT / 2


def lane_height(label: str) -> float:
    return LANE_HEIGHT + LABEL_LINE * (len(label_lines(label)) - 1)


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Timeline:
    width: float
    height: float
    left: float
    right: float
    axis_y: float
    span_ms: float
    lanes: tuple[Lane, ...]
    ticks: tuple[Tick, ...]
    #: x of each attempt's generation.finished (a guide line across every lane).
    generation_ends: tuple[float, ...]
    #: The zoomed window (ms after the round's start), and the whole round's span.
    offset_ms: float = 0.0
    full_span_ms: float = 0.0

    @property
    def zoomed(self) -> bool:
        return self.offset_ms > 0 or self.span_ms < self.full_span_ms

    @property
    def window_s(self) -> tuple[str, str, str]:
        """From, to and the whole span in seconds, as the zoom form shows them."""

        def text(ms: float) -> str:
            return f"{ms / 1000:.3f}".rstrip("0").rstrip(".")

        return (
            text(self.offset_ms),
            text(self.offset_ms + self.span_ms),
            text(self.full_span_ms),
        )

    @property
    def lane_height(self) -> float:
        return LANE_HEIGHT


def axis_ticks(scale: Scale) -> tuple[Tick, ...]:
    """Evenly spaced, round-numbered ticks from 0 to the span."""
    span_s = scale.span_ms / 1000
    step: float = next(
        (s for s in TICK_STEPS if span_s / s <= MAX_TICKS), math.ceil(span_s / MAX_TICKS)
    )
    # As many decimals as the step has (0.25 s steps need two), so no two labels read alike.
    digits = len(f"{step:g}".partition(".")[2])
    count = int(span_s / step + 1e-9)
    return tuple(
        Tick(
            x=round(scale.left + number * step * 1000 / scale.span_ms * scale.width, 1),
            label=seconds(scale.offset_ms + number * step * 1000, digits=digits),
        )
        for number in range(count + 1)
    )


def _event_times(events: Iterable[Event]) -> dict[tuple[int, int, str], datetime]:
    """When each action's events happened: (attempt, index, type) → first ts."""
    times: dict[tuple[int, int, str], datetime] = {}
    for event in events:
        if event.action_index is not None:
            times.setdefault((event.attempt, event.action_index, event.type), event.ts)
    return times


def round_span_ms(round_: AssembledRound) -> float:
    """How long the round's events last, from its start (at least 1 ms)."""
    start = round_.started_at
    end = max([start, *(event.ts for event in round_.events)])
    if round_.finished_at is not None:
        end = max(end, round_.finished_at)
    return max((end - start) / timedelta(milliseconds=1), 1.0)


def build_timeline(
    round_: AssembledRound, window_ms: tuple[float, float] | None = None
) -> Timeline:
    """The geometry of a round's timeline: one generation lane per attempt (from its first
    event to ``generation.finished``), then one lane per action with its marks.

    ``window_ms`` zooms to a time range (ms after the round's start): the axis covers only it
    and marks wholly outside it are left out."""
    events = round_.events
    span_ms = full_span_ms = round_span_ms(round_)
    offset_ms = 0.0
    if window_ms is not None:
        low, high = sorted(window_ms)
        low = min(max(low, 0.0), span_ms)
        high = min(max(high, low + 1.0), span_ms + 1.0)
        offset_ms, span_ms = low, high - low
    start = round_.started_at + timedelta(milliseconds=offset_ms)
    scale = Scale(start=start, span_ms=span_ms, offset_ms=offset_ms)
    times = _event_times(events)
    lanes: list[Lane] = []
    y = 0.0
    multi = len(round_.attempts) > 1
    for attempt in round_.attempts:
        lanes.append(_generation_lane(round_, attempt, scale, y, multi=multi))
        y += lanes[-1].height
        for action in attempt.actions:
            lanes.append(_action_lane(action, attempt, scale, times, y, multi=multi))
            y += lanes[-1].height
    if not lanes:
        # A round with no action yet still shows its generation from the start.
        empty = Attempt(attempt=0, actions=(), generation_finished_at=None)
        lanes.append(_generation_lane(round_, empty, scale, y, multi=False))
        y += lanes[-1].height
    return Timeline(
        width=TIMELINE_WIDTH,
        height=y + AXIS_HEIGHT,
        left=TIMELINE_LEFT,
        right=TIMELINE_WIDTH - TIMELINE_RIGHT,
        axis_y=y,
        span_ms=span_ms,
        lanes=tuple(lanes),
        ticks=axis_ticks(scale),
        offset_ms=offset_ms,
        full_span_ms=full_span_ms,
        generation_ends=tuple(
            scale.x(attempt.generation_finished_at)
            for attempt in round_.attempts
            if attempt.generation_finished_at is not None
            and scale.inside(attempt.generation_finished_at)
        ),
    )


def _generation_lane(
    round_: AssembledRound, attempt: Attempt, scale: Scale, y: float, *, multi: bool
) -> Lane:
    # What the model streamed in this attempt (tool events run detached and round events
    # belong to the round, so neither says how long the stream lasted).
    streamed = [
        event.ts
        for event in round_.events
        if event.attempt == attempt.attempt and event.type in STREAM_EVENTS
    ]
    begin = round_.started_at if attempt.attempt == 0 or not streamed else min(streamed)
    finished = attempt.generation_finished_at
    end = finished or max([begin, *streamed])
    x, width = scale.bar(begin, end)
    length = seconds((end - begin) / timedelta(milliseconds=1))
    title = (
        f"generation: {length}, until generation.finished"
        if finished is not None
        else f"generation: no generation.finished (last action streamed after {length})"
    )
    label = f"generation (attempt {attempt.attempt + 1})" if multi else "generation"
    return Lane(
        kind="generation",
        label=label,
        title=title,
        y=y,
        attempt=attempt.attempt,
        unfinished=finished is None,
        marks=(Mark("generation", x, title, width),) if scale.overlaps(begin, end) else (),
    )


def _action_lane(
    action: RoundAction,
    attempt: Attempt,
    scale: Scale,
    times: Mapping[tuple[int, int, str], datetime],
    y: float,
    *,
    multi: bool,
) -> Lane:
    slot = (attempt.attempt, action.index)
    marks: list[Mark] = []
    run_end = action.finished_at
    status = f" ({action.status})" if action.status else ""
    if action.early_started_at is not None:
        end = run_end or attempt.generation_finished_at or action.early_started_at
        x, width = scale.bar(action.early_started_at, end)
        lead = early_lead(action, attempt)
        if scale.overlaps(action.early_started_at, end):
            marks.append(Mark(KINDS["early"].chip, x, f"started early, {lead}{status}", width))
    if action.started_at is not None:
        end = run_end or action.started_at
        x, width = scale.bar(action.started_at, end)
        ran = seconds((end - action.started_at) / timedelta(milliseconds=1))
        if scale.overlaps(action.started_at, end):
            marks.append(Mark("exec", x, f"ran after generation: {ran}{status}", width))
    if action.verdict == "accepted":
        at = times.get((*slot, ACTION_ACCEPTED))
        if at is not None and scale.inside(at):
            marks.append(Mark("accepted", scale.x(at), "accepted"))
    if action.timeout is not None:
        at = times.get((*slot, TOOL_TIMEOUT)) or action.finished_at
        if at is not None and scale.inside(at):
            timeout = action.timeout
            text = (
                f"timeout after {seconds(timeout.elapsed_ms, digits=3)}, "
                f"limit {seconds(timeout.limit_ms)}"
            )
            if timeout.async_alternative:
                text += f"; try {timeout.async_alternative}"
            marks.append(_kind_mark("timeout", scale.x(at), text))
    if action.dedup is not None:
        at = times.get((*slot, LEDGER_DEDUP))
        if at is not None and scale.inside(at):
            dedup = action.dedup
            marks.append(
                _kind_mark(
                    "dedup",
                    scale.x(at),
                    f"dedup: reused {action.tool_call_id} (matched by {dedup.match}, "
                    f"first at action {dedup.original_action_index})",
                )
            )
    if action.verdict == "rejected":
        at = times.get((*slot, ACTION_REJECTED))
        if at is not None and scale.inside(at):
            reason = action.explanation or action.code or "rejected"
            marks.append(_kind_mark("rejection", scale.x(at), f"rejected: {reason}"))
    name = action.tool_id or action.action or "?"
    prefix = f"{attempt.attempt + 1}·#{action.index}" if multi else f"#{action.index}"
    label = f"{prefix} {name}"
    return Lane(
        kind="action",
        label=label,
        title=f"action {action.index}: {name}",
        y=y,
        attempt=attempt.attempt,
        index=action.index,
        marks=tuple(marks),
    )
