"""Assertions over a page as a browser reads it: parse the HTML, find the element, check its text.

A raw substring check (``'class="chip dedup"' in page``) breaks when attributes are reordered and
passes on markup inside a comment or a script; these helpers parse the page (the standard
library's HTML parser) and compare what a user sees: an element, its attributes, its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

#: Elements that never have content (no end tag).
_VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parts: list[str | Element] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The element's text as a reader sees it: descendants' text, spaces collapsed."""
        return " ".join("".join(_text(part) for part in self.parts).split())

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def matches(self, tag: str | None, attrs: dict[str, str | None]) -> bool:
        if tag is not None and self.tag != tag:
            return False
        for name, wanted in attrs.items():
            if name == "class" and wanted is not None:
                if not set(wanted.split()) <= self.classes:
                    return False
            elif wanted is None:
                if name not in self.attrs:
                    return False
            elif self.attrs.get(name) != wanted:
                return False
        return True


def _text(part: str | Element) -> str:
    return part if isinstance(part, str) else " " + part.text + " "


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.all: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].parts.append(element)
        self.all.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].parts.append(element)
        self.all.append(element)

    def handle_endtag(self, tag: str) -> None:
        # Close up to the matching open element (HTML lets some end tags be left out).
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(page: str) -> list[Element]:
    """Every element of ``page``, in document order."""
    builder = _Builder()
    builder.feed(page)
    builder.close()
    return builder.all


def find_all(page: str, tag: str | None = None, **attrs: str | None) -> list[Element]:
    """The elements with ``tag`` and these attributes (``class_="chip dedup"``: has both
    classes; ``hidden=None``: has the attribute, whatever its value; ``data_kind``: data-kind)."""
    wanted = {name.rstrip("_").replace("_", "-"): value for name, value in attrs.items()}
    return [element for element in parse(page) if element.matches(tag, wanted)]


def find(page: str, tag: str | None = None, **attrs: str | None) -> Element:
    """The one element matching (see :func:`find_all`); fails when there is none or several."""
    found = find_all(page, tag, **attrs)
    assert len(found) == 1, f"expected one <{tag or '*'} {attrs}>, found {len(found)}"
    return found[0]


def assert_element(
    page: str, tag: str | None = None, text: str | None = None, **attrs: str | None
) -> Element:
    """An element matching (see :func:`find_all`) exists, with exactly ``text`` when given."""
    found = find_all(page, tag, **attrs)
    assert found, f"no <{tag or '*'} {attrs}> in the page"
    if text is None:
        return found[0]
    for element in found:
        if element.text == text:
            return element
    shown = [element.text for element in found][:5]
    raise AssertionError(f"no <{tag or '*'} {attrs}> reads {text!r}; they read {shown}")


def page_text(page: str) -> str:
    """The whole page as a reader sees it (tags dropped, entities decoded, spaces collapsed)."""
    builder = _Builder()
    builder.feed(page)
    builder.close()
    return builder.root.text
