"""MCP ToolAnnotations as a server sent them, read with the spec's defaults, and the traits they
suggest (DESIGN §7, §2.8).

Discovery stores annotations exactly as sent, so an absent hint stays absent; the spec's
defaults (``readOnlyHint`` false, ``destructiveHint`` true, ``idempotentHint`` false,
``openWorldHint`` true) are applied only here, when reading, and every hint read says whether it
was ``explicit`` or a ``default``. Annotations are untrusted unless the operator marks the server
trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

#: The spec's default for each hint (2025-06-18 and later).
DEFAULTS: Final[Mapping[str, bool]] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}

EXPLICIT: Final = "explicit"
DEFAULT: Final = "default"
UNTRUSTED: Final = "untrusted server"


@dataclass(frozen=True)
class Hint:
    name: str
    value: bool
    explicit: bool

    @property
    def mark(self) -> str:
        return EXPLICIT if self.explicit else DEFAULT


def hints(annotations: Mapping[str, Any] | None) -> Mapping[str, Hint]:
    """Every hint, the sent value when it is a boolean, else the spec's default. Shared
    answers: the few combinations of sent hints recur across thousands of tools."""
    sent = annotations or {}
    key = tuple(value if isinstance(value := sent.get(name), bool) else None for name in DEFAULTS)
    found = _HINTS.get(key)
    if found is None:
        found = MappingProxyType(
            {
                name: Hint(name, given, True) if given is not None else Hint(name, default, False)
                for (name, default), given in zip(DEFAULTS.items(), key, strict=True)
            }
        )
        _HINTS[key] = found  # at most 3 ** len(DEFAULTS) keys
    return found


_HINTS: dict[tuple[bool | None, ...], Mapping[str, Hint]] = {}


def read_only(annotations: Mapping[str, Any] | None) -> Hint:
    return hints(annotations)["readOnlyHint"]


def destructive(annotations: Mapping[str, Any] | None) -> bool:
    """Destructive once defaults are filled in (meaningful only when not read-only)."""
    found = hints(annotations)
    return not found["readOnlyHint"].value and found["destructiveHint"].value


@dataclass(frozen=True)
class Suggestion:
    """The traits annotations suggest for one tool, and what the suggestion rests on."""

    tool_id: str
    strategy: str
    #: ``explicit`` / ``default`` for the hint it rests on; plus ``untrusted server``.
    marks: tuple[str, ...]
    #: Idempotent (explicitly or not): counts as a retry story (DESIGN §2.8 ``natural_key``).
    idempotent: Hint

    @property
    def only_defaults(self) -> bool:
        return DEFAULT in self.marks

    def traits(self) -> dict[str, Any]:
        return {"strategy": [self.strategy]}


def suggest(tool_id: str, annotations: Mapping[str, Any] | None, *, trusted: bool) -> Suggestion:
    """read-only → ``exploration``; not read-only → ``exploitation``."""
    found = hints(annotations)
    ro = found["readOnlyHint"]
    marks = [ro.mark]
    if not trusted:
        marks.append(UNTRUSTED)
    return Suggestion(
        tool_id=tool_id,
        strategy="exploration" if ro.value else "exploitation",
        marks=tuple(marks),
        idempotent=found["idempotentHint"],
    )


def classes(annotations: Mapping[str, Any] | None) -> tuple[bool, bool]:
    """(read-only, destructive) once defaults are filled in: tools that differ in either are
    not one behaviour."""
    found = hints(annotations)
    ro = found["readOnlyHint"].value
    return ro, not ro and found["destructiveHint"].value
