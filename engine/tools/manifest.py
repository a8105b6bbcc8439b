"""The runtime-discovered tools (the ``manifest`` trait layer, DESIGN §2.6).

The runtime discovers tool metadata and ``@tool_trait`` decorators in code; an admin uploads that
as JSON, or Traitdeck's discovery writes it (docs/discovery.md):
``{"<model-facing tool id>": {"tool_traits": {...}, "description": str, "params": [...],
"annotations": {...}, "source": {...}}, ...}``. Only ``tool_traits`` is a trait layer; the other
keys describe the tool as its server or module gave it (MCP ``annotations`` exactly as sent, so an
absent hint stays absent) and where the entry came from. It is the layer between the built-ins and
the YAML config, and it lists the tools of a connection whose ``allowed`` list does not name them
(absent, or ``*``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from core.gc_pause import gc_paused
from core.json_limits import json_problem
from core.numbers import BOUND_TEXT, show_number
from core.text import unencodable_path
from core.vocabulary import MAX_DEPTH, MAX_DIGITS, MAX_MAGNITUDE
from engine.document.jsonable import json_kind


class ManifestError(ValueError):
    """The manifest is not the expected JSON shape; the message is one plain sentence."""


@dataclass(frozen=True)
class Manifest:
    """Tool id → raw trait mapping, in manifest order."""

    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Tool id → the whole entry (traits, description, params, annotations, source).
    entries: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self.tools

    def traits_for(self, tool_id: str) -> Mapping[str, Any] | None:
        """The discovered trait mapping of a tool, or ``None`` when the manifest lacks it."""
        return self.tools.get(tool_id)

    def annotations_for(self, tool_id: str) -> Mapping[str, Any] | None:
        """The MCP ToolAnnotations of a tool as its server sent them, or ``None``."""
        found = self.entries.get(tool_id, {}).get("annotations")
        return found if isinstance(found, Mapping) else None

    def source_for(self, tool_id: str) -> Mapping[str, Any]:
        """Where the entry came from (``{}`` for a hand-written manifest)."""
        found = self.entries.get(tool_id, {}).get("source")
        return found if isinstance(found, Mapping) else {}

    @staticmethod
    def provenance(tool_id: str) -> str:
        return f"manifest {tool_id}"

    def callables_for(self, alias: str, kind: str) -> list[str]:
        """The callables the manifest knows for a connection alias, in manifest order.

        python (and named_service) ids are ``<alias>.<callable>`` with a plain callable name;
        mcp ids are ``mcp.<alias>.<tool>``.
        """
        prefix = f"mcp.{alias}." if kind == "mcp" else f"{alias}."
        found: list[str] = []
        for tool_id in self.tools:
            if not tool_id.startswith(prefix):
                continue
            name = tool_id[len(prefix) :]
            # A python callable is an identifier: "a.b.c" belongs to alias "a.b", not to "a".
            if not name or (kind != "mcp" and "." in name):
                continue
            if name not in found:
                found.append(name)
        return found


@gc_paused()  # thousands of discovered tools: core.gc_pause says why
def parse_manifest(data: Any) -> Manifest:
    """Read an uploaded manifest (JSON-decoded); raise :class:`ManifestError` when malformed.

    A tool entry without ``tool_traits`` is a discovered tool with no traits.
    """
    if not isinstance(data, Mapping):
        raise ManifestError(
            "The manifest must be a JSON object mapping tool ids to "
            '{"tool_traits": {...}} objects, not ' + json_kind(data) + "."
        )
    # A discovered manifest is large (thousands of tools with their schemas): one JSON encoding
    # answers "storable" at C speed; only a manifest that fails it is walked for the reason.
    if not _plainly_storable(data):
        problem = _unstorable(data)
        if problem is not None:
            # Refused here, for every path (API, forms, commands): the database could not
            # store it, or the pages could not show it.
            raise ManifestError(problem)
        where = unencodable_path(data, root="the manifest")
        if where is not None:
            raise ManifestError(
                "The manifest holds text that cannot be encoded as UTF-8 (a lone surrogate) at"
                f" {where}."
            )
    tools: dict[str, Mapping[str, Any]] = {}
    entries: dict[str, Mapping[str, Any]] = {}
    for tool_id, entry in data.items():
        if not isinstance(tool_id, str) or not tool_id.strip():
            raise ManifestError(f"Manifest tool id {tool_id!r} must be a non-empty string.")
        if not isinstance(entry, Mapping):
            raise ManifestError(
                f"Manifest entry {tool_id!r} must be an object like "
                f'{{"tool_traits": {{...}}}}, not {json_kind(entry)}.'
            )
        traits = entry.get("tool_traits", {})
        if traits is None:
            traits = {}
        if not isinstance(traits, Mapping):
            raise ManifestError(
                f"The tool_traits of manifest entry {tool_id!r} must be an object, "
                f"not {json_kind(traits)}."
            )
        for key, kinds, shape in _DESCRIBING_KEYS:
            if key in entry and entry[key] is not None and not isinstance(entry[key], kinds):
                raise ManifestError(
                    f"The {key} of manifest entry {tool_id!r} must be {shape}, "
                    f"not {json_kind(entry[key])}."
                )
        tools[tool_id] = MappingProxyType(dict(traits))
        entries[tool_id] = MappingProxyType(dict(entry))
    return Manifest(tools=MappingProxyType(tools), entries=MappingProxyType(entries))


#: The describing keys of an entry and the JSON type each must have when present.
_DESCRIBING_KEYS: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("description", str, "a string"),
    ("params", list, "a list"),
    ("annotations", Mapping, "an object"),
    ("source", Mapping, "an object"),
)


#: A JSON string: runs of plain characters, or escapes (a run at a time, not a character).
_STRING = re.compile(r'"(?:[^"\\]+|\\.)*"')
#: An integer of more digits than the number bound allows (the walk then checks its value).
_LONG_INTEGER = re.compile(rf"[0-9]{{{MAX_DIGITS},}}")
#: Everything but brackets, and an innermost pair of brackets (nothing nested inside).
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\{\}|\[\]")


def _plainly_storable(data: Any) -> bool:
    """True when ``data`` is surely storable: it encodes as strict JSON and as UTF-8, holds no
    NUL, and nests at most ``MAX_DEPTH`` containers (counted on the encoded text with its
    strings taken out). False means "walk it to find out", not "refused". Every step is a C
    loop (the encoder, regular expressions): a 5,000-tool discovery is megabytes of text."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    if "\\u0000" in text:
        return False
    bare = _STRING.sub("", text)
    if _LONG_INTEGER.search(bare):
        return False  # maybe past the number bound: the walk decides
    # Depth: each pass takes out the innermost pairs, one level; past MAX_DEPTH passes
    # something is left only when the text nests deeper.
    brackets = _NOT_BRACKET.sub("", bare)
    for _ in range(MAX_DEPTH):
        if not brackets:
            return True
        brackets = _INNERMOST.sub("", brackets)
    return not brackets


def _unstorable(data: Any) -> str | None:
    """Why the manifest cannot be stored as JSON and shown again, or ``None``: a NUL character
    (PostgreSQL refuses it in JSON), NaN or Infinity (not JSON: SQLite's JSON check refuses them),
    a number past the bound people type, or nesting past ``MAX_DEPTH`` (encoding it again would
    exhaust the stack)."""
    found = json_problem(data, max_int=MAX_MAGNITUDE - 1)
    if found is None:
        return None
    return {
        "nul": "The manifest contains a NUL character.",
        "nul_key": "The manifest contains a NUL character.",
        "integer": f"The manifest holds {show_number(found.value)}: {BOUND_TEXT}.",
        "not_finite": f"The manifest holds the number {found.value}, which JSON cannot hold.",
        "too_deep": f"The manifest nests deeper than {MAX_DEPTH} levels.",
        "not_json": "",  # not asked for (json_types is off)
    }[found.kind]
