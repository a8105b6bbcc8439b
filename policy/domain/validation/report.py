"""Collecting diagnostics with their source positions (DESIGN §6 "Diagnostic positions").

A diagnostic about a key points at that key, one about a value at the value (or list item), one
about a missing field at the first key of the mapping that lacks it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.document.diagnostics import Diagnostic, Severity
from engine.document.paths import Path, format_path
from engine.document.source import Mark, SourceMap

At = Literal["key", "value", "first_key"]


@dataclass
class Reporter:
    source: SourceMap
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def mark(self, path: Path, at: At) -> Mark | None:
        if at == "key":
            return self.source.at_key(path)
        if at == "first_key":
            return self.source.first_key(path)
        return self.source.at_value(path)

    def report(
        self,
        severity: Severity,
        code: str,
        path: Path,
        message: str,
        hint: str,
        *,
        at: At = "value",
    ) -> None:
        mark = self.mark(path, at)
        line, column = mark if mark is not None else (None, None)
        self.diagnostics.append(
            Diagnostic(severity, code, format_path(path), line, column, message, hint)
        )

    def error(self, code: str, path: Path, message: str, hint: str, *, at: At = "value") -> None:
        self.report(Severity.ERROR, code, path, message, hint, at=at)

    def warning(self, code: str, path: Path, message: str, hint: str, *, at: At = "value") -> None:
        self.report(Severity.WARNING, code, path, message, hint, at=at)

    def info(self, code: str, path: Path, message: str, hint: str, *, at: At = "value") -> None:
        self.report(Severity.INFO, code, path, message, hint, at=at)


def describe(value: Any) -> str:
    """A value's type in plain words, for messages ("a string", "a list", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}" if len(value) <= 40 else "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def close_match(word: Any, candidates: Iterable[str]) -> str | None:
    """The closest candidate to a mistyped word, if one is close enough."""
    if not isinstance(word, str):
        return None
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def listing(values: Iterable[Any]) -> str:
    """``[a, b]`` the way strategies are written in YAML."""
    return "[" + ", ".join(str(v) for v in values) + "]"


def shape_list(reporter: Reporter, raw: Mapping[Any, Any], path: Path, key: str) -> None:
    value = raw.get(key)
    if value is None:
        return
    if not isinstance(value, list):
        reporter.error(
            "shape",
            (*path, key),
            f"{key} must be a list, not {describe(value)}; the runtime cannot read it.",
            f"Write {key} as a list, e.g. {key}: [search].",
        )
        return
    for index, item in enumerate(value):
        if not isinstance(item, str):
            reporter.error(
                "shape",
                (*path, key, index),
                f"Each {key} item must be a name, not {describe(item)}; the runtime ignores it.",
                "Write the tool or operation name as a plain string.",
            )


def shape_mapping(reporter: Reporter, raw: Mapping[Any, Any], path: Path, key: str) -> bool:
    """Report a non-mapping ``key``; True when there is a mapping to check further."""
    value = raw.get(key)
    if value is None:
        return False
    if isinstance(value, Mapping):
        return True
    reporter.error(
        "shape",
        (*path, key),
        f"{key} must be a mapping, not {describe(value)}; the runtime ignores it.",
        f"Write {key} as a mapping keyed by callable name.",
    )
    return False
