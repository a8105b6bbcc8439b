"""The connection editor's forms, one per kind the runtime loads (python, mcp, named_service).

Each form knows the mapping it was rendered from (``existing``) so that it only writes the keys it
manages; the edits in ``policy.domain.edits`` keep everything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from core.numbers import parse_whole
from engine.tools.connections import (
    NAMESPACE_LIST_KEYS,
    NOT_OFFERED_CALLABLES,
    OPERATION_CALLABLES,
    WILDCARD,
)
from policy.domain.edits import NamespaceEdit, parse_name_list
from policy.domain.validation.tools import untypeable

#: A bound on namespace rows one POST may carry (the form renders the existing ones plus one).
MAX_NAMESPACE_ROWS = 50


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _or_none(value: str) -> str | None:
    """A cleared text field removes its key (``None``) instead of writing an empty string."""
    value = value.strip()
    return value or None


def _list_text(items: Any) -> str:
    if not isinstance(items, list):
        return ""
    return "\n".join(str(item) for item in items if item != WILDCARD)


class ConnectionForm(forms.Form):
    """Fields shared by every kind. ``existing`` is the raw connection being edited (None: new)."""

    kind = ""
    alias = forms.CharField(
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args: Any, existing: Mapping[Any, Any] | None = None, **kwargs: Any):
        self.existing: Mapping[Any, Any] = existing or {}
        kwargs.setdefault("initial", self.initial_from(self.existing))
        super().__init__(*args, **kwargs)

    @property
    def adding(self) -> bool:
        return not self.existing

    def clean_alias(self) -> str:
        """Refused before saving, not warned about after: every tool id of the connection
        starts with the alias, and the model must type it (``alias-untypeable``)."""
        alias = _text(self.cleaned_data.get("alias"))
        if alias and untypeable(alias):
            raise forms.ValidationError(
                f"{alias!r} has characters a model cannot reliably type: use letters, digits, "
                "_, - and . only (every tool id of this connection starts with the alias)."
            )
        return alias

    def initial_from(self, raw: Mapping[Any, Any]) -> dict[str, Any]:
        return {"alias": _text(raw.get("alias"))}

    def fields_to_write(self) -> dict[str, Any]:
        """The connection keys this form manages; ``None`` removes a key."""
        data = self.cleaned_data
        fields: dict[str, Any] = {"alias": _or_none(data["alias"])}
        if self.adding:
            fields = {"kind": self.kind, **fields}
        return fields


class PythonConnectionForm(ConnectionForm):
    kind = "python"
    module = forms.CharField(required=False, help_text="A Python module path, e.g. pkg.tools.")
    ref = forms.CharField(required=False, help_text="Or a file path, e.g. tools/jobs.py.")
    allowed = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="Callables the model may use, one per line or comma separated. "
        "Empty: every tool the code offers (known from the manifest).",
    )
    field_order = ["module", "ref", "alias", "allowed"]

    def initial_from(self, raw: Mapping[Any, Any]) -> dict[str, Any]:
        return {
            **super().initial_from(raw),
            "module": _text(raw.get("module")),
            "ref": _text(raw.get("ref")),
            "allowed": _list_text(raw.get("allowed")),
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not _text(data.get("module")) and not _text(data.get("ref")):
            self.add_error(
                None, "A python connection needs module or ref: the code the runtime loads."
            )
        if not _text(data.get("alias")) and not _text(self.existing.get("name")):
            self.add_error(
                "alias",
                "A python connection needs an alias: the model sees <alias>.<callable>.",
            )
        return data

    def fields_to_write(self) -> dict[str, Any]:
        data = self.cleaned_data
        allowed = parse_name_list(data["allowed"])
        return {
            **super().fields_to_write(),
            "module": _or_none(data["module"]),
            "ref": _or_none(data["ref"]),
            "allowed": allowed or None,
        }


class McpConnectionForm(ConnectionForm):
    kind = "mcp"
    server_id = forms.CharField(required=False, help_text="The MCP server's id.")
    all_tools = forms.BooleanField(
        required=False, label="All tools", help_text='Writes allowed: ["*"].'
    )
    allowed = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="Tool names, one per line or comma separated. Empty: every tool of the server.",
    )
    field_order = ["server_id", "alias", "all_tools", "allowed"]

    def initial_from(self, raw: Mapping[Any, Any]) -> dict[str, Any]:
        listed = raw.get(self.list_key(raw))
        return {
            **super().initial_from(raw),
            "server_id": _text(raw.get("server_id")),
            "all_tools": isinstance(listed, list) and WILDCARD in listed,
            "allowed": _list_text(listed),
        }

    @staticmethod
    def list_key(raw: Mapping[Any, Any]) -> str:
        """``tools`` when the connection lists its tools there (and has no ``allowed``)."""
        if "allowed" not in raw and isinstance(raw.get("tools"), list):
            return "tools"
        return "allowed"

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        has_other = any(_text(self.existing.get(key)) for key in ("server", "name"))
        if not _text(data.get("server_id")) and not has_other:
            self.add_error(
                "server_id", "An mcp connection needs server_id: the server the runtime reaches."
            )
        return data

    def fields_to_write(self) -> dict[str, Any]:
        data = self.cleaned_data
        listed = parse_name_list(data["allowed"])
        listed = [name for name in listed if name != WILDCARD]
        if data["all_tools"]:
            listed = [WILDCARD, *listed]
        return {
            **super().fields_to_write(),
            "server_id": _or_none(data["server_id"]),
            self.list_key(self.existing): listed or None,
        }


OPERATION_CHOICES = [
    (
        operation,
        f"{operation} → {name}" + (" (never offered)" if name in NOT_OFFERED_CALLABLES else ""),
    )
    for operation, name in OPERATION_CALLABLES.items()
]


class NamedServiceConnectionForm(ConnectionForm):
    """Alias plus one row per namespace (name and operations as checkboxes).

    Rows are plain prefixed fields (``ns-0-name``, ``ns-0-ops``, ``ns-0-original``,
    ``ns-0-remove``) so the template can lay them out; ``ns-count`` says how many rows came.
    """

    kind = "named_service"

    def __init__(self, *args: Any, existing: Mapping[Any, Any] | None = None, **kwargs: Any):
        data = args[0] if args else kwargs.get("data")
        blocks = existing.get("namespaces") if existing else None
        self.blocks: Mapping[Any, Any] = blocks if isinstance(blocks, Mapping) else {}
        self.count_error = ""
        if data is not None:
            raw_count = str(data.get("ns-count", "0"))
            parsed = parse_whole(raw_count)
            if parsed is not None:
                count = min(parsed, MAX_NAMESPACE_ROWS)
            else:
                count = 0
                self.count_error = (
                    f"The form's namespace row count must be a whole number, not {raw_count[:20]!r}"
                    "; reload the page and try again."
                )
        else:
            count = len(self.blocks) + 1
        self.row_count = count
        super().__init__(*args, existing=existing, **kwargs)
        for row in range(count):
            self.fields[f"ns-{row}-name"] = forms.CharField(required=False, label="Namespace")
            self.fields[f"ns-{row}-original"] = forms.CharField(
                required=False, widget=forms.HiddenInput
            )
            self.fields[f"ns-{row}-ops"] = forms.MultipleChoiceField(
                required=False,
                choices=OPERATION_CHOICES,
                widget=forms.CheckboxSelectMultiple,
                label="Operations",
            )
            self.fields[f"ns-{row}-remove"] = forms.BooleanField(required=False, label="Remove")

    def initial_from(self, raw: Mapping[Any, Any]) -> dict[str, Any]:
        initial = super().initial_from(raw)
        blocks = raw.get("namespaces")
        if not isinstance(blocks, Mapping):
            return initial
        for row, (name, block) in enumerate(blocks.items()):
            operations = _namespace_operations(block)
            initial[f"ns-{row}-name"] = str(name)
            initial[f"ns-{row}-original"] = str(name)
            initial[f"ns-{row}-ops"] = [op for op in operations if op in OPERATION_CALLABLES]
        return initial

    def rows(self) -> list[dict[str, Any]]:
        """The namespace rows for the template: bound fields and what the form cannot show."""
        out = []
        for row in range(self.row_count):
            original = self[f"ns-{row}-original"].value() or ""
            block = self.blocks.get(original) if original else None
            kept = [
                str(op)
                for op in _namespace_operations(block)
                if not (isinstance(op, str) and op in OPERATION_CALLABLES)
            ]
            out.append(
                {
                    "name": self[f"ns-{row}-name"],
                    "original": self[f"ns-{row}-original"],
                    "ops": self[f"ns-{row}-ops"],
                    "remove": self[f"ns-{row}-remove"],
                    "is_new": not original,
                    "kept": kept,
                }
            )
        return out

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.count_error:
            self.add_error(None, self.count_error)
        seen: set[str] = set()
        for row in range(self.row_count):
            name = _text(data.get(f"ns-{row}-name"))
            if data.get(f"ns-{row}-remove"):
                continue
            if not name:
                if data.get(f"ns-{row}-ops") or data.get(f"ns-{row}-original"):
                    self.add_error(f"ns-{row}-name", "Give the namespace a name, or tick Remove.")
                continue
            if name in seen:
                self.add_error(f"ns-{row}-name", f"Namespace {name!r} is listed twice.")
            seen.add(name)
        return data

    def namespaces(self) -> list[NamespaceEdit]:
        data = self.cleaned_data
        out = []
        for row in range(self.row_count):
            name = _text(data.get(f"ns-{row}-name"))
            if data.get(f"ns-{row}-remove") or not name:
                continue
            original = _text(data.get(f"ns-{row}-original")) or None
            out.append(NamespaceEdit(name, tuple(data.get(f"ns-{row}-ops") or ()), original))
        return out


def _namespace_operations(block: Any) -> list[Any]:
    if not isinstance(block, Mapping):
        return []
    for key in NAMESPACE_LIST_KEYS:
        if isinstance(block.get(key), list):
            items: list[Any] = block[key]
            return items
    return []


CONNECTION_FORMS: dict[str, type[ConnectionForm]] = {
    form.kind: form
    for form in (PythonConnectionForm, McpConnectionForm, NamedServiceConnectionForm)
}
