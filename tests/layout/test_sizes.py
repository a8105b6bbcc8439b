"""The house's size rules (issue 36): no top-level package holds more than 30 % of the product's
lines, no folder more than 25 Python modules directly. The product is the packages
``pyproject.toml`` ships, without tests, migrations and the conformance recorder; a line is any
line of a ``.py`` file."""

from __future__ import annotations

from collections import Counter

from tests.product import PRODUCT, ROOT, product_sources

MAX_SHARE = 0.30
MAX_MODULES = 25


def package_lines() -> Counter[str]:
    lines: Counter[str] = Counter()
    for path in product_sources(migrations=False):
        lines[path.relative_to(ROOT).parts[0]] += len(path.read_text().splitlines())
    return lines


def test_no_top_level_package_holds_more_than_30_percent_of_the_lines() -> None:
    lines = package_lines()
    total = sum(lines.values())
    shares = {package: lines[package] / total for package in PRODUCT}
    print(  # the figures, for `pytest -s`
        "\n".join(f"{p:12} {lines[p]:6} lines {s:6.1%}" for p, s in sorted(shares.items()))
    )
    assert {p: f"{s:.1%}" for p, s in shares.items() if s > MAX_SHARE} == {}


def test_no_folder_holds_more_than_25_python_modules_directly() -> None:
    modules = Counter(path.parent for path in product_sources(migrations=False))
    crowded = {str(f.relative_to(ROOT)): n for f, n in modules.items() if n > MAX_MODULES}
    assert crowded == {}
