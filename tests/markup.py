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

#: Elements a browser lays out in the line of text around them: no word break at their edges
#: (``jobs.<wbr>launch`` reads "jobs.launch"); every other element starts on its own line or cell.
_INLINE = frozenset(
    [
        "a",
        "abbr",
        "b",
        "bdi",
        "bdo",
        "cite",
        "code",
        "data",
        "dfn",
        "em",
        "i",
        "kbd",
        "label",
        "mark",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strong",
        "sub",
        "sup",
        "time",
        "u",
        "var",
        "wbr",
    ]
)

#: Elements whose content a reader never sees as text.
_UNSEEN = frozenset(["script", "style", "template"])


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parts: list[str | Element] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The element's text as a reader sees it: descendants' text, spaces collapsed."""
        return " ".join("".join(_text(part) for part in self.parts).split())

    def iter(self) -> list[Element]:
        """Every element inside this one, in document order."""
        found: list[Element] = []
        for part in self.parts:
            if isinstance(part, Element):
                found.append(part)
                found.extend(part.iter())
        return found

    def find_all(self, tag: str | None = None, **attrs: str | None) -> list[Element]:
        """The elements inside this one matching (see the module's :func:`find_all`)."""
        wanted = _wanted(attrs)
        return [element for element in self.iter() if element.matches(tag, wanted)]

    def find(self, tag: str | None = None, **attrs: str | None) -> Element:
        """The one element inside this one matching; fails when there is none or several."""
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"expected one <{tag or '*'} {attrs}>, found {len(found)}"
        return found[0]

    @property
    def raw_text(self) -> str:
        """The text as written, spaces kept, as a ``<pre>`` or ``<textarea>`` shows it (the one
        newline right after their start tag is not content in HTML)."""
        text = "".join(part if isinstance(part, str) else part.raw_text for part in self.parts)
        if self.tag in ("pre", "textarea") and text.startswith("\n"):
            return text[1:]
        return text

    @property
    def value(self) -> str:
        """What a form control sends: an input's value, a textarea's text, a select's chosen
        option (the first one when none is marked ``selected``, as a browser picks)."""
        if self.tag == "textarea":
            return self.raw_text
        if self.tag == "select":
            options = self.find_all("option")
            chosen = [option for option in options if "selected" in option.attrs] or options[:1]
            return chosen[0].value if chosen else ""
        if self.tag == "option" and "value" not in self.attrs:
            return self.text
        return self.attrs.get("value", "")

    @property
    def children(self) -> list[Element]:
        return [part for part in self.parts if isinstance(part, Element)]

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
    if isinstance(part, str):
        return part
    if part.tag in _UNSEEN:
        return " "
    if part.tag in _INLINE:
        return "".join(_text(inner) for inner in part.parts)
    return " " + part.text + " "


def _wanted(attrs: dict[str, str | None]) -> dict[str, str | None]:
    return {name.rstrip("_").replace("_", "-"): value for name, value in attrs.items()}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].parts.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].parts.append(element)

    def handle_endtag(self, tag: str) -> None:
        # Close up to the matching open element (HTML lets some end tags be left out).
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def document(page: str) -> Element:
    """``page`` parsed: its top-level elements are the root's ``children``."""
    builder = _Builder()
    builder.feed(page)
    builder.close()
    return builder.root


def parse(page: str) -> list[Element]:
    """Every element of ``page``, in document order."""
    return document(page).iter()


def find_all(page: str, tag: str | None = None, **attrs: str | None) -> list[Element]:
    """The elements with ``tag`` and these attributes (``class_="chip dedup"``: has both
    classes; ``hidden=None``: has the attribute, whatever its value; ``data_kind``: data-kind)."""
    return document(page).find_all(tag, **attrs)


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
    return document(page).text


def text_of(page: str, tag: str | None = None, **attrs: str | None) -> str:
    """What a reader sees in the one element matching (see :func:`find`)."""
    return find(page, tag, **attrs).text


def texts(page: str, tag: str | None = None, **attrs: str | None) -> list[str]:
    """What a reader sees in each element matching, in page order."""
    return [element.text for element in find_all(page, tag, **attrs)]


def alerts(page: str) -> list[str]:
    """What the page tells the user went wrong or happened, each region as a reader sees it, in
    page order: every ``role="alert"`` element, every element of class ``error`` (a field's
    error), every item of a ``ul.messages`` (Django's messages) or a ``ul.errorlist`` (a form's
    errors). Empty regions (an alert waiting for a message) are left out."""
    root = document(page)
    listed = {
        id(item)
        for listing in ("messages", "errorlist")
        for items in root.find_all("ul", class_=listing)
        for item in items.find_all("li")
    }
    regions = [
        element
        for element in root.iter()
        if element.attrs.get("role") == "alert"
        or "error" in element.classes
        or id(element) in listed
    ]
    return [region.text for region in regions if region.text]


def assert_alert(page: str, words: str) -> str:
    """One of the page's :func:`alerts` says ``words``; the alert's whole text is returned."""
    said = alerts(page)
    for alert in said:
        if words in alert:
            return alert
    raise AssertionError(f"no alert says {words!r}; the alerts say {said}")


def table_rows(table: Element) -> list[dict[str, str]]:
    """A table's body rows as ``{column heading: cell text}``, in page order."""
    headings = [cell.text for cell in table.find("thead").find_all("th")]
    rows = []
    for row in table.find("tbody").find_all("tr"):
        cells = [cell.text for cell in row.children if cell.tag in ("td", "th")]
        rows.append(dict(zip(headings, cells, strict=True)))
    return rows


def is_fragment(page: str) -> bool:
    """The response is a piece to swap into a page (htmx), not a whole document."""
    return not find_all(page, "html") and not find_all(page, "body")


def first_element(page: str) -> Element:
    """The fragment's outermost first element (what htmx swaps in)."""
    children = document(page).children
    assert children, "the page has no element"
    return children[0]
