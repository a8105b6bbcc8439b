"""Conformance families: each module records the runtime's answers for one kind of case and
predicts the same answers with Traitdeck's engine.

A family module defines:

- ``NAME`` (the fixture file is ``tests/conformance/fixtures/<NAME>.json``) and ``MIN_CASES``;
- ``record(rt) -> list[dict]``: runs the runtime (``conformance.harness.Runtime``), returns cases,
  each ``{"id": str, "input": {...}, "runtime": <the runtime's answer>}``. It never imports
  ``policy`` (the runtime's side must not agree with us by construction);
- ``predict(case_input) -> <answer>``: Traitdeck's answer for the same input, Django-free, compared
  with ``==`` to the recorded ``runtime`` answer.
"""

from __future__ import annotations

import importlib
from types import ModuleType

FAMILY_MODULES = (
    "traits",
    "tables",
    "rounds",
    "config",
    "catalog",
    "compact",
    "bundles",
    "files",
    "discovery",
    "react",
    "roster",
    "v2",
    "v3off",
    "setorder",
)


def family(name: str) -> ModuleType:
    return importlib.import_module(f"conformance.families.{name}")


def families() -> list[ModuleType]:
    out = []
    for name in FAMILY_MODULES:
        try:
            out.append(family(name))
        except ModuleNotFoundError as exc:
            if exc.name != f"conformance.families.{name}":
                raise
    return out
