"""No test checks a substring of a raw answer unless it says why the raw text is the point.

``"Saved" in response.content.decode()`` passes on the word inside a comment, a script or an
attribute, and breaks when the markup is spelled another way: a page is checked over the parsed
page (``tests/markup.py``, see docs/testing.md), JSON over ``response.json()``. Where the raw text
is the product (a YAML export, a CSV, plain text, a secret that must be nowhere in the answer),
the assert carries a ``# raw: <why>`` comment on its line or the line above. Equality of whole
bodies (byte identity with an export) is not a substring check and needs no comment.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: The calls of a test client (Django's or httpx) that answer a response.
_REQUESTS = frozenset(["get", "post", "put", "patch", "delete", "head", "options", "request"])
#: The substring and pattern checks on a string.
_CHECKS = frozenset(["startswith", "endswith", "count", "find", "index"])
_PATTERNS = frozenset(["search", "match", "fullmatch", "findall"])


def _is_request(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _REQUESTS
    )


class _Function:
    """One test function's names: which hold a response, which hold a response's raw body."""

    def __init__(self, function: ast.AST) -> None:
        self.responses: set[str] = set()
        self.bodies: set[str] = set()
        assignments = [
            node for node in ast.walk(function) if isinstance(node, ast.Assign | ast.AnnAssign)
        ]
        for _ in range(2):  # a body may be assigned from a name assigned further down the walk
            for node in assignments:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if not isinstance(target, ast.Name) or node.value is None:
                        continue
                    if _is_request(node.value):
                        self.responses.add(target.id)
                    elif self.raw(node.value):
                        self.bodies.add(target.id)

    def raw(self, node: ast.expr) -> bool:
        """``node`` is a response's body as received (bytes or decoded), not parsed."""
        if isinstance(node, ast.Name):
            return node.id in self.bodies
        if isinstance(node, ast.Attribute) and node.attr in ("content", "text"):
            base = node.value
            return (isinstance(base, ast.Name) and base.id in self.responses) or _is_request(base)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("decode", "lower")
        ):
            return self.raw(node.func.value)
        return False

    def substring_checks(self, test: ast.expr) -> Iterator[ast.AST]:
        for node in ast.walk(test):
            if isinstance(node, ast.Compare):
                for op, right in zip(node.ops, node.comparators, strict=True):
                    if isinstance(op, ast.In | ast.NotIn) and self.raw(right):
                        yield node
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in _CHECKS and self.raw(node.func.value):
                    yield node
                if node.func.attr in _PATTERNS and any(self.raw(arg) for arg in node.args):
                    yield node


def raw_substring_asserts(source: str) -> list[int]:
    """The lines of the asserts in ``source`` that check a substring of a raw answer without a
    ``# raw:`` comment saying why."""
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        names = _Function(function)
        for node in ast.walk(function):
            if not isinstance(node, ast.Assert) or not any(names.substring_checks(node.test)):
                continue
            end = node.end_lineno or node.lineno
            said = lines[node.lineno - 2 : end]  # the line above and the assert's own lines
            if not any("# raw:" in line for line in said):
                found.append(node.lineno)
    return sorted(set(found))


def test_no_test_checks_a_substring_of_a_raw_answer_without_saying_why() -> None:
    found = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in raw_substring_asserts(path.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "check the parsed page (tests/markup.py) or response.json() instead, or say why the raw "
        "text is the point with a '# raw: <why>' comment: " + ", ".join(found)
    )


def test_it_finds_a_substring_of_a_raw_answer_and_accepts_a_reason() -> None:
    source = """
def test_a(client):
    response = client.get("/")
    page = response.content.decode()
    assert "Saved" in page
    assert b"Saved" in response.content
    assert "Saved" in client.get("/").text
    assert page.startswith("<!doctype")
    # raw: a plain-text answer
    assert "until must be" in page
    assert page == "exact"
    assert "Saved" in find(page, "p").text
"""
    assert raw_substring_asserts(source) == [5, 6, 7, 8]
