"""Diagnostics: what Traitdeck tells the admin about a policy (DESIGN §2.9).

A diagnostic names a place in the policy (``path``, below ``surfaces.as_consumer``), where that
place is in the YAML source (``line``/``column``, 1-based, ``None`` only when no source node
exists), what is wrong in plain words and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


#: Order used when sorting diagnostics for people: errors first.
SEVERITY_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}

#: Codes whose presence means the text cannot be imported at all (DESIGN §6 "Imports").
#: ``policy-too-large`` (``policy.domain.caps``) only where caps are given: the web, not the CLI.
REFUSING_CODES = frozenset(
    {
        "yaml-syntax",
        "duplicate-key",
        "yaml-too-large",
        "number-too-large",
        "text-encoding",
        "policy-too-large",
    }
)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    code: str
    path: str
    line: int | None
    column: int | None
    message: str
    hint: str

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = str(self.severity)
        return data

    def as_text(self) -> str:
        """One line for people: ``line 12:5 error strategy-value at agents.main…: message``."""
        where = f"line {self.line}:{self.column} " if self.line is not None else ""
        at = f" at {self.path}" if self.path else ""
        hint = f" Hint: {self.hint}" if self.hint else ""
        return f"{where}{self.severity} {self.code}{at}: {self.message}{hint}"


def summarize(diagnostics: Iterable[Diagnostic]) -> dict[str, int]:
    """Count diagnostics per severity: ``{"errors": n, "warnings": n, "info": n}``."""
    counts = {"errors": 0, "warnings": 0, "info": 0}
    for diagnostic in diagnostics:
        if diagnostic.severity is Severity.ERROR:
            counts["errors"] += 1
        elif diagnostic.severity is Severity.WARNING:
            counts["warnings"] += 1
        else:
            counts["info"] += 1
    return counts


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


#: Warnings about something the runtime will *do* with side effects the admin may not have
#: meant (a tool that is not safe to repeat starting early or retried, an execution profile
#: silently dropped, a wildcard overriding a tool's own entry): listed before the cosmetic ones
#: of the same severity, and marked, so they do not read like ``id-key-ignored``.
HIGH_RISK_CODES = frozenset(
    {
        "early-without-idempotency",
        "exploitation-unsafe-retry",
        "override-drops-execution",
        "wildcard-overrides",
    }
)
#: Warnings that change nothing the runtime does (a key it ignores, a name hard to type). Not
#: execution-inert: a call its author meant to start early runs after generation instead.
LOW_RISK_CODES = frozenset({"id-key-ignored", "alias-untypeable"})


def risk(diagnostic: Diagnostic) -> str:
    """``"high"``, ``"low"`` or ``""`` (neither): how much a diagnostic's subject can hurt."""
    if diagnostic.code in HIGH_RISK_CODES:
        return "high"
    if diagnostic.code in LOW_RISK_CODES:
        return "low"
    return ""


_RISK_RANK = {"high": 0, "": 1, "low": 2}


def sort_by_severity_and_risk(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Errors first, then within a severity the risky ones first, then source order."""
    return sorted(
        diagnostics,
        key=lambda d: (
            SEVERITY_RANK[d.severity],
            _RISK_RANK[risk(d)],
            d.line is None,
            d.line or 0,
            d.column or 0,
        ),
    )


def sort_for_display(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Source order (line, column), diagnostics without a position last; stable otherwise."""
    return sorted(
        diagnostics,
        key=lambda d: (d.line is None, d.line or 0, d.column or 0),
    )
