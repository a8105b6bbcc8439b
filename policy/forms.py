"""The editor's forms: they parse what the admin typed into values for the pure edits.

Each form knows the mapping it was rendered from (``existing``) so that it only writes the keys it
manages; the edits in ``policy.domain.edits`` keep everything else. The connection forms are in
``policy.forms_connections``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms

from core.vocabulary import CONCRETE_STRATEGIES, EARLY_PROFILE
from engine.tools.manifest import ManifestError, parse_manifest
from engine.traits.execution_design import MODES, RETRIES
from engine.traits.traits import is_early_profile
from policy.domain.edits import (
    EditError,
    as_sentence,
    build_design,
    build_traits,
    check_agent_name,
    design_fields,
)

MANIFEST_MAX_BYTES = 1024 * 1024


# --- agents ------------------------------------------------------------------------------------


class AgentNameForm(forms.Form):
    name = forms.CharField(
        strip=True,
        error_messages={"required": "Give the agent a name."},
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def clean_name(self) -> str:
        try:
            return check_agent_name(self.cleaned_data["name"])
        except EditError as exc:
            raise forms.ValidationError(as_sentence(str(exc))) from None


def first_error(form: forms.Form) -> str:
    """The form's first error as one sentence (for the page's problem box)."""
    for errors in form.errors.values():
        return str(errors[0])
    return "The form is not valid."


# --- manifest ----------------------------------------------------------------------------------


class ManifestForm(forms.Form):
    file = forms.FileField(required=False, label="Manifest file (JSON)")
    text = forms.CharField(
        required=False,
        label="Or paste the JSON",
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("file")
        if upload is not None:
            if upload.size > MANIFEST_MAX_BYTES:
                raise forms.ValidationError("The manifest file is over 1 MiB.")
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The manifest file is not UTF-8 text.") from None
        else:
            text = data.get("text") or ""
        if not text.strip():
            raise forms.ValidationError("Choose a manifest file or paste its JSON.")
        if len(text.encode("utf-8")) > MANIFEST_MAX_BYTES:
            raise forms.ValidationError("The manifest is over 1 MiB.")
        try:
            manifest = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"The manifest is not valid JSON: {exc.msg} (line {exc.lineno}, column "
                f"{exc.colno}). Nothing was stored."
            ) from None
        except RecursionError:
            raise forms.ValidationError(
                "The manifest is not valid JSON: it nests too deeply. Nothing was stored."
            ) from None
        try:
            parse_manifest(manifest)
        except ManifestError as exc:
            raise forms.ValidationError(f"{exc} Nothing was stored.") from None
        data["manifest"] = manifest
        return data


# --- one tool's traits and execution design -------------------------------------------------------

EXECUTION_FIELDS = tuple(EARLY_PROFILE)
DESIGN_TEXT_FIELDS = ("async_alternative", "status_tool", "compensation")


class ToolForm(forms.Form):
    """A tool's traits (strategy, early start, the four execution fields) and, unless it edits
    a namespace override or the MCP wildcard, its execution design (DESIGN §2.8)."""

    strategy = forms.MultipleChoiceField(
        required=False,
        choices=[(value, value) for value in CONCRETE_STRATEGIES],
        widget=forms.CheckboxSelectMultiple,
    )
    early = forms.BooleanField(required=False, label="Early start")
    # The runtime recognises one value per execution field (the early profile); a value written
    # by hand is offered too, so saving never drops it silently.
    trigger = forms.ChoiceField(required=False, label="Trigger")
    concurrency = forms.ChoiceField(required=False, label="Concurrency")
    result_dependency = forms.ChoiceField(required=False, label="Result dependency")
    replay = forms.ChoiceField(required=False, label="Replay")
    timeout_s = forms.FloatField(
        required=False,
        label="Timeout (s)",
        widget=forms.NumberInput(attrs={"min": "0", "step": "any", "inputmode": "decimal"}),
        error_messages={"invalid": "Enter the timeout as a number of seconds, e.g. 20."},
    )
    mode = forms.ChoiceField(required=False, choices=[("", "—"), *((m, m) for m in MODES)])
    retry = forms.ChoiceField(
        required=False,
        choices=[("", "—"), *((r, r) for r in RETRIES)],
        label="Retry story",
        help_text="What makes a repeated call safe: natural_key (its params identify what it "
        "changes), idempotency_key (a key makes the tool ignore a repeat), dedup, or not_safe.",
    )
    confirm = forms.BooleanField(required=False, label="Confirmation gate")
    async_alternative = forms.CharField(required=False)
    status_tool = forms.CharField(required=False)
    compensation = forms.CharField(required=False)

    def __init__(
        self,
        *args: Any,
        traits: Mapping[str, Any] | None = None,
        design: Mapping[str, Any] | None = None,
        with_design: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("initial", self.initial_from(traits or {}, design or {}))
        super().__init__(*args, **kwargs)
        self.with_design = with_design
        execution = (traits or {}).get("execution")
        for name in EXECUTION_FIELDS:
            written = execution.get(name) if isinstance(execution, Mapping) else None
            choices = [("", "— (left out)"), (EARLY_PROFILE[name], EARLY_PROFILE[name])]
            if isinstance(written, str) and written and written != EARLY_PROFILE[name]:
                choices.append((written, f"{written} (as written; not recognised)"))
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = choices
        if not with_design:
            for name in ("timeout_s", "mode", "retry", "confirm", *DESIGN_TEXT_FIELDS):
                del self.fields[name]

    @staticmethod
    def initial_from(traits: Mapping[str, Any], design: Mapping[str, Any]) -> dict[str, Any]:
        raw_strategy = traits.get("strategy")
        items = raw_strategy if isinstance(raw_strategy, list) else [raw_strategy]
        ticked = {item.strip().lower() for item in items if isinstance(item, str)}
        execution = traits.get("execution")
        early = is_early_profile(execution)
        initial: dict[str, Any] = {
            "strategy": [value for value in CONCRETE_STRATEGIES if value in ticked],
            "early": early,
        }
        # With early start on, the switch owns the four fields: prefilled fields would write the
        # profile back after the admin switches it off.
        if isinstance(execution, Mapping) and not early:
            for name in EXECUTION_FIELDS:
                if isinstance(execution.get(name), str):
                    initial[name] = execution[name]
        timeout = design.get("timeout_s")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool):
            initial["timeout_s"] = timeout
        for name in ("mode", "retry", *DESIGN_TEXT_FIELDS):
            if isinstance(design.get(name), str):
                initial[name] = design[name]
        initial["confirm"] = design.get("confirm") is True
        return initial

    @staticmethod
    def suggested(query: Mapping[str, str], *, with_design: bool) -> dict[str, Any]:
        """Values a link asks the form to open with (tool health advice: ``?timeout_s=12``);
        a value the form would refuse is left out, never shown as if suggested."""
        found: dict[str, Any] = {}
        if query.get("early") in ("0", "false"):
            found["early"] = False
        if not with_design:
            return found
        timeout = query.get("timeout_s")
        if timeout:
            try:
                seconds = float(timeout)
            except ValueError:
                seconds = -1.0
            if 0 < seconds <= 10**9 and seconds == seconds:
                found["timeout_s"] = int(seconds) if seconds.is_integer() else seconds
        if query.get("mode") in MODES:
            found["mode"] = query["mode"]
        if query.get("retry") in RETRIES:
            found["retry"] = query["retry"]
        return found

    def clean_timeout_s(self) -> float | None:
        value: float | None = self.cleaned_data.get("timeout_s")
        if value is None:
            return None
        if value <= 0:
            raise forms.ValidationError("The timeout must be a positive number of seconds.")
        return value

    def traits(self, existing: Mapping[str, Any] | None) -> dict[str, Any]:
        data = self.cleaned_data
        return build_traits(
            existing,
            strategy=data["strategy"],
            early=data["early"],
            execution_fields={name: data[name] for name in EXECUTION_FIELDS},
        )

    def design(self, existing: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if not self.with_design:
            return None
        return build_design(existing, design_fields(self.cleaned_data))
