"""Where things are in the YAML source: positions of keys and values by document path."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.document.paths import Path

#: (line, column), both 1-based.
Mark = tuple[int, int]


@dataclass(slots=True)
class SourceMap:
    """Positions recorded while loading YAML.

    ``values[path]`` is where the node at ``path`` starts; ``keys[path]`` is where the mapping key
    whose value is at ``path`` starts (absent for list items and the root). A document built in
    Python (not loaded from text) has an empty map: every lookup answers ``None``.
    """

    values: dict[Path, Mark] = field(default_factory=dict)
    keys: dict[Path, Mark] = field(default_factory=dict)
    # mapping path → its first key, built on the first ``first_key`` after ``keys`` grew: a
    # diagnostic per tool pointing at its connection must not scan every key of the document.
    _first_keys: dict[Path, Mark] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _indexed: int = field(default=-1, init=False, repr=False, compare=False)

    def at_value(self, path: Path) -> Mark | None:
        """The node at ``path`` (a list item, a scalar); falls back to its key."""
        return self.values.get(path) or self.keys.get(path)

    def at_key(self, path: Path) -> Mark | None:
        """The key that names ``path``; falls back to the node itself (list items have no key)."""
        return self.keys.get(path) or self.values.get(path)

    def first_key(self, path: Path) -> Mark | None:
        """The first key of the mapping at ``path`` (for "this mapping lacks a field")."""
        if self._indexed != len(self.keys):
            firsts: dict[Path, Mark] = {}
            for key_path, mark in self.keys.items():
                parent = key_path[:-1]
                if key_path and (parent not in firsts or mark < firsts[parent]):
                    firsts[parent] = mark
            self._first_keys, self._indexed = firsts, len(self.keys)
        return self._first_keys.get(path) or self.at_value(path)


def excerpt(text: str, line: int, *, around: int = 2) -> tuple[tuple[int, str, bool], ...]:
    """The lines ``line - around`` to ``line + around`` of ``text`` (1-based) as ``(number,
    text, is_the_line)``: what a person needs to find a syntax error in their own file."""
    lines = text.splitlines()
    if line > len(lines):  # a parser reports "end of text" on the line after the last one
        lines.append("")
        line = len(lines)
    first, last = max(1, line - around), min(len(lines), line + around)
    return tuple((n, lines[n - 1], n == line) for n in range(first, last + 1))
