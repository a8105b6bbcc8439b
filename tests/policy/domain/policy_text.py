"""Helpers for validator tests: write a policy as YAML text, validate it, find positions in it."""

from __future__ import annotations

import textwrap

from engine.document.diagnostics import Diagnostic
from engine.tools.manifest import Manifest
from policy.domain.validation.validate import validate_policy
from policy.domain.yaml_io import load_policy

HEAD = "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools:\n"
EARLY_FLOW = (
    "{trigger: tool_call_complete, concurrency: parallel_with_generation, "
    "result_dependency: detached, replay: at_most_once_per_round}"
)


def doc(connections: str) -> str:
    """A policy whose agent ``main`` has the given connection list (YAML, unindented)."""
    return HEAD + textwrap.indent(textwrap.dedent(connections).strip("\n") + "\n", " " * 10)


def check(text: str, manifest: Manifest | None = None) -> list[Diagnostic]:
    loaded = load_policy(text)
    assert not loaded.refused, loaded.diagnostics
    return validate_policy(loaded.data, loaded.source, manifest)


def where(text: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the nth occurrence of ``needle`` in the text: positions are
    computed from the text itself, independently of the loader under test."""
    index = -1
    for _ in range(nth):
        index = text.index(needle, index + 1)
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


def only(diagnostics: list[Diagnostic], code: str) -> Diagnostic:
    found = [d for d in diagnostics if d.code == code]
    assert len(found) == 1, [d.as_text() for d in diagnostics]
    return found[0]


def none_of(diagnostics: list[Diagnostic], code: str) -> bool:
    return all(d.code != code for d in diagnostics)


def position(diagnostic: Diagnostic) -> tuple[int | None, int | None]:
    return diagnostic.line, diagnostic.column


def codes(diagnostics: list[Diagnostic]) -> set[str]:
    return {d.code for d in diagnostics}
