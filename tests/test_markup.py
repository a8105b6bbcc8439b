"""The HTML assertion helpers see what a browser sees, not the spelling of the markup."""

from __future__ import annotations

import pytest

from tests.markup import assert_element, find, find_all, page_text

PAGE = """<main><!-- <b id="count">9</b> -->
<p class="counter  big" data-kind="dedups"><b id="count">3</b> dedups &amp; more</p>
<input type="checkbox" checked name="has" value="early"><label>early starts</label></main>"""


def test_it_finds_an_element_whatever_the_attribute_order_and_spacing() -> None:
    element = assert_element(PAGE, "p", "3 dedups & more", data_kind="dedups", class_="big counter")
    assert element.classes == {"counter", "big"}


def test_it_ignores_markup_inside_a_comment() -> None:
    assert find(PAGE, "b", id="count").text == "3"


def test_it_reads_void_elements_and_boolean_attributes() -> None:
    assert "checked" in find(PAGE, "input", name="has").attrs
    assert find_all(PAGE, "label")[0].text == "early starts"


def test_it_fails_naming_what_it_did_find() -> None:
    with pytest.raises(AssertionError, match="they read"):
        assert_element(PAGE, "label", "early start")
    assert page_text(PAGE) == "3 dedups & more early starts"
