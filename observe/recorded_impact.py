"""What a policy change would do to the rounds this instance recorded (issue 13).

The rounds come from the store (their replayable form, :func:`observe.domain.rounds.
recorded_round`), the two policies from the draft or published versions, and the comparison is
:func:`engine.replay.draft_impact.replay`. The draft uses the agents' current manifests, a
version the manifests it was published with (like with like) and, for rounds that did not report a
multi-action mode, each side's own default instruction profile, else the
``TRAITDECK_MULTI_ACTION_MODE`` setting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, cast

from django.conf import settings

from core.numbers import parse_whole
from engine.catalog.multi_action import ModeSources
from engine.replay.draft_impact import (
    ImpactReport,
    ModeFor,
    RecordedRound,
    RecordedRoundError,
    Resolver,
    parse_recorded_round,
    replay,
)
from engine.round.dryrun import AgentResolutionLike
from engine.round.react_version import VersionSources, react_version
from engine.tools.manifest import Manifest
from engine.tools.resolution import AgentResolution
from engine.traits.round_policy import RoundPolicy
from observe.domain.rounds import Assembly, recorded_round
from observe.selectors import RoundFilter, rounds_page
from policy.selectors import agent_default_mode, draft_state, manifest_for, policy_agent_run
from policy.versions import version_data, version_get, version_manifest, version_published

#: The window when none is asked for: the newest rounds.
DEFAULT_WINDOW: Final = 1000
MAX_WINDOW: Final = 100_000
#: Rounds read per query (a query over every day's partition costs ~15 ms to plan).
_PAGE: Final = 5000


class SideError(ValueError):
    """A side that names no policy (no such version, nothing published); the message says so."""


@dataclass(frozen=True)
class Side:
    """One policy of the comparison: ``draft``, or a version by number."""

    ref: str
    label: str
    data: Any
    #: The manifest of an agent on this side (the draft: the current one).
    manifest: Callable[[str], Manifest | None] = field(default=manifest_for, compare=False)


def policy_side(ref: str) -> Side:
    """``draft``, ``published`` (the version in force) or a version number."""
    text = ref.strip().lower()
    if text == "draft":
        state = draft_state()
        return Side("draft", f"the draft (revision {state.revision})", state.data)
    if text == "published":
        found = version_published()
        if found is None:
            raise SideError("Nothing is published yet: compare with the draft or a version.")
    elif (number := parse_whole(text)) is not None:
        found = version_get(number)
        if found is None:
            raise SideError(f"There is no version {number}.")
    else:
        raise SideError(f"A side is 'draft', 'published' or a version number (got {ref[:40]!r}).")
    version = found
    return Side(
        str(found.number),
        f"version {found.number}",
        version_data(found),
        lambda agent: version_manifest(version, agent),
    )


def _resolver(side: Side) -> Resolver:
    data = side.data

    def resolve(agent: str) -> AgentResolution | None:
        return policy_agent_run(data, agent, manifest_of=side.manifest).resolution

    return resolve


def _mode(data: Any) -> ModeFor:
    modes: dict[str, ModeSources] = {}

    def mode(agent: str) -> ModeSources:
        if agent not in modes:  # once per agent: a replay asks for every round
            modes[agent] = agent_default_mode(data, agent)
        return modes[agent]

    return mode


class RoundWindow:
    """The newest ``limit`` rounds the filter selects (after cursor ``before``) that have
    something to replay; after iterating, ``read`` is how many rows were read and ``next`` the
    cursor that continues after them (``None``: no more rounds)."""

    def __init__(self, round_filter: RoundFilter, limit: int, before: str | None = None) -> None:
        self.round_filter, self.limit, self.before = round_filter, limit, before
        self.read = 0
        self.next: str | None = None

    def __iter__(self) -> Iterator[RecordedRound]:
        cursor, left = self.before, self.limit
        while left > 0:
            rows, cursor = rounds_page(
                self.round_filter, limit=min(_PAGE, left), before=cursor, keys_only=True
            )
            left -= len(rows)
            self.read += len(rows)
            self.next = cursor
            for row in rows:
                assembly = cast(Assembly, row.assembly or {})
                found = recorded_round((row.agent, row.turn_id, row.iteration), assembly)
                if found is None:
                    continue
                try:
                    yield parse_recorded_round(found)
                except RecordedRoundError:  # stored before ingest checked what it checks now
                    continue
            if cursor is None:
                return


def stored_rounds(round_filter: RoundFilter, limit: int) -> Iterator[RecordedRound]:
    """The newest ``limit`` rounds the filter selects that have something to replay."""
    return iter(RoundWindow(round_filter, limit))


def policy_impact(
    candidate: Side,
    baseline: Side,
    *,
    round_filter: RoundFilter,
    limit: int = DEFAULT_WINDOW,
    window: RoundWindow | None = None,
) -> ImpactReport:
    """Replay the window's rounds under both sides (``report.rounds`` counts the rounds with
    something to replay). Pass ``window`` to read where it stopped (its ``next`` cursor). Each
    round is predicted under the react agent its round.started named, else the setting's
    (``report.react_version`` and its source)."""
    version, source = react_version(VersionSources(setting=settings.TRAITDECK_REACT_AGENT_VERSION))
    return replay(
        window if window is not None else stored_rounds(round_filter, limit),
        candidate=_resolver(candidate),
        baseline=_resolver(baseline),
        candidate_mode=_mode(candidate.data),
        baseline_mode=_mode(baseline.data),
        react_version=version,
        version_source=source,
    )


def side_policy(side: Side, agent: str) -> tuple[RoundPolicy | AgentResolutionLike, ModeSources]:
    """One side's policy for ``agent`` (no tools when the side has no such agent nor a default)
    and its default multi-action mode."""
    found = _resolver(side)(agent)
    return (found if found is not None else RoundPolicy.of(())), _mode(side.data)(agent)
