"""Forms for the runtime tokens page."""

from __future__ import annotations

import re

from django import forms

from accounts.models import RuntimeToken, Scope

_TOKEN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,99}")


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=RuntimeToken._meta.get_field("name").max_length,
        help_text="Which runtime uses it, e.g. prod-agents or simulator.",
    )
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one scope."},
    )

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        if not _TOKEN_NAME.fullmatch(name):
            raise forms.ValidationError(
                "A token name is 1–100 letters, digits, '_', '.', ':' or '-', starting with a"
                " letter, digit or '_'."
            )
        return name
