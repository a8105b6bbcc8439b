"""The HTML assertion helpers see what a browser sees, not the spelling of the markup."""

from __future__ import annotations

import pytest

from tests.markup import (
    alerts,
    assert_alert,
    assert_element,
    find,
    find_all,
    first_element,
    is_fragment,
    page_text,
    table_rows,
)

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


FORM = """<div id="f"><pre id="out">
  two  spaces</pre><textarea name="t">
a
b</textarea><select name="s"><option value="x">X</option><option value="y" selected>Y</option>
</select><select name="first"><option value="p">P</option></select>
<p>jobs.<wbr>launch_<b>background</b>_job</p><script>var hidden = "<b>no</b>";</script></div>"""


def test_it_reads_form_values_and_text_as_written() -> None:
    assert find(FORM, "textarea", name="t").value == "a\nb"
    assert find(FORM, "select", name="s").value == "y"
    assert find(FORM, "select", name="first").value == "p"  # a browser sends the first option
    assert find(FORM, "pre", id="out").raw_text == "  two  spaces"


def test_inline_elements_add_no_space_and_scripts_are_not_text() -> None:
    assert find(FORM, "p").text == "jobs.launch_background_job"
    assert "hidden" not in page_text(FORM)
    # the <b> inside the script is not an element
    assert [bold.text for bold in find_all(FORM, "b")] == ["background"]


def test_it_searches_inside_an_element_and_tells_a_fragment_from_a_page() -> None:
    outer = first_element(FORM)
    assert outer.attrs["id"] == "f"
    assert [option.value for option in outer.find("select", name="s").find_all("option")] == [
        "x",
        "y",
    ]
    assert is_fragment(FORM)
    assert not is_fragment("<!doctype html><html><body><p>x</p></body></html>")


MESSAGES = """<div id="problem" role="alert"></div><ul class="messages"><li class="error">Not
  saved.</li></ul><p class="error" role="alert">The draft <b>changed</b>.</p>
<ul class="errorlist"><li>Enter a name.</li></ul><p>Not an alert.</p>
<table><thead><tr><th>Name</th><th>Status</th></tr></thead>
<tbody><tr><td>sim</td><td><span>active</span></td></tr><tr><th>old</th><td>revoked</td></tr></tbody>
</table>"""


def test_it_reads_the_alerts_a_user_is_shown() -> None:
    assert alerts(MESSAGES) == ["Not saved.", "The draft changed.", "Enter a name."]
    assert assert_alert(MESSAGES, "draft changed") == "The draft changed."
    with pytest.raises(AssertionError, match="the alerts say"):
        assert_alert(MESSAGES, "Not an alert")


def test_it_reads_table_rows_by_their_heading() -> None:
    assert table_rows(find(MESSAGES, "table")) == [
        {"Name": "sim", "Status": "active"},
        {"Name": "old", "Status": "revoked"},
    ]
