"""The product's top-level packages and their Python sources, as ``pyproject.toml`` ships them
(setuptools ``include``), without the conformance recorder (a test tool, not the product)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_INCLUDE = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"][
    "find"
]["include"]
PRODUCT = tuple(sorted(p.rstrip("*") for p in _INCLUDE if p.rstrip("*") != "conformance"))


def product_sources(*, migrations: bool = True) -> Iterator[Path]:
    """Every product ``.py`` file (optionally without migrations), sorted."""
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if migrations or "migrations" not in path.parts:
                yield path
