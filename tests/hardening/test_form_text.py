"""A form field holding a lone surrogate (which Django's HTTP decoding never yields, but a request
built another way can) is refused, never a 500: also where the refused form would show it again."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.hardening.test_fuzz import (  # noqa: F401 - the fixture
    FORM,
    FORMS,
    admin,
    form_data_as_given,
    form_fields,
    load_sample_into_draft,
    rolled_back,
)
from tests.markup import text_of


@pytest.mark.parametrize("form", FORMS)
def test_a_lone_surrogate_in_any_field_is_never_a_500(admin: Client, form: str) -> None:  # noqa: F811
    load_sample_into_draft()
    admin.raise_request_exception = False
    page, target = FORMS[form]
    failed = []
    for name in form_fields(admin, page):
        fields = {name: "x\ud800", "base_revision": "1"}
        if form == "connection add":
            fields["kind"] = "named_service"
        with rolled_back(), form_data_as_given(fields):
            response = admin.post(target, b"-", content_type=FORM)
        if response.status_code >= 500:
            failed.append(name)
    assert not failed


def test_the_refusal_says_why_and_nothing_changes(admin: Client) -> None:  # noqa: F811
    from policy.selectors import draft_state

    load_sample_into_draft()
    admin.raise_request_exception = False
    before = draft_state().revision
    fields = {"module": "x\ud800", "base_revision": str(before)}
    with form_data_as_given(fields):
        response = admin.post("/policy/agents/main/connections/0/edit/", b"-", content_type=FORM)
    assert response.status_code == 422
    assert "lone surrogate" in text_of(response.content.decode(), "main")
    assert draft_state().revision == before
