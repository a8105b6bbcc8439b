"""Which react agent a deployment runs (issue 37 §0): ``v2`` — KDCube's default
(``AI_REACT_AGENT_VERSION``, ``base_workflow._react_agent_version``: trimmed, lower-cased, anything
but ``v2``/``v3`` is ``v2``) — or ``v3``. The two answer the same round differently (v2: one action
per decision, protocol retries, no overseer, early start or ledger; v3: the overseer, early starts,
the ledger and, with multi-action on, bundles), so every prediction says which it assumed.

Traitdeck's precedence, highest first: the round file's ``"react_version"``, the explicit choice
(CLI ``--react-version``, the API's and the playground's ``react_version``), what
``round.started`` reported, what the bridge infers from the envelopes, the setting
``TRAITDECK_REACT_AGENT_VERSION`` (read as the runtime reads its own), KDCube's default ``v2``.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = [
    "DEFAULT_REACT_VERSION",
    "REACT_VERSIONS",
    "VersionSources",
    "react_version",
    "read_react_version",
    "version_meaning",
]

REACT_VERSIONS: Final = ("v2", "v3")
DEFAULT_REACT_VERSION: Final = "v2"


def read_react_version(raw: object) -> tuple[str, bool]:
    """The runtime's reading of a version setting and whether the value was one it knows
    (``False``: it fell back to ``v2``; the overview and ``check --deploy`` warn)."""
    text = str(raw or "").strip().lower()
    if text in REACT_VERSIONS:
        return text, True
    return DEFAULT_REACT_VERSION, raw is None or not str(raw).strip()


class VersionSources(NamedTuple):
    """Where a prediction's react version may come from, highest first; ``None``: silent."""

    round: str | None = None
    explicit: str | None = None
    reported: str | None = None
    inferred: str | None = None
    setting: str | None = None


_SOURCE_WORDS: Final = (
    "the round's react_version",
    "the explicit choice",
    "round.started's report",
    "the bridge's inference from the envelopes",
    "the setting TRAITDECK_REACT_AGENT_VERSION",
)


def react_version(sources: VersionSources) -> tuple[str, str]:
    """The version a prediction assumes and where it came from (words for the output). A
    source holding an unknown value is skipped, except the setting (read as the runtime reads
    ``AI_REACT_AGENT_VERSION``: an unknown value is ``v2``)."""
    for value, words in zip(sources[:4], _SOURCE_WORDS[:4], strict=True):
        text = str(value or "").strip().lower()
        if text in REACT_VERSIONS:
            return text, words
    if sources.setting is not None and str(sources.setting).strip():
        return read_react_version(sources.setting)[0], _SOURCE_WORDS[4]
    return DEFAULT_REACT_VERSION, "KDCube's default (AI_REACT_AGENT_VERSION=v2)"


def version_meaning(version: str) -> str:
    """One sentence: what the version means for rejections, early starts and dedups."""
    if version == "v2":
        return (
            "the v2 agent takes one action per decision: two or more, or a malformed one, run "
            "nothing and the model is asked again (2 protocol retries per turn); it has no "
            "overseer (no strategy rejections), never starts a tool early and dedups nothing"
        )
    return (
        "the v3 agent's overseer rejects what the strategy traits forbid while the model "
        "streams, starts early-eligible tools before generation ends and dedups re-streamed "
        "calls through its ledger"
    )
