"""Reading and writing policy YAML (DESIGN §3; §6 "Export bytes and hashes", "Imports").

Loading never raises: every problem becomes a diagnostic. The text is composed into nodes with
PyYAML's composer (nodes keep their source marks) and the Python values are built here, node by
node, so that Traitdeck can refuse what ``yaml.safe_load`` silently accepts (a repeated key keeps
only its last value) and bound what it would happily expand (aliases, nesting).

The events come from libyaml's C parser when PyYAML has it, from PyYAML's pure-Python parser
otherwise; text the C parser refuses is read again in pure Python, so a diagnostic's words and
position never depend on which parser is installed. Dumping stays pure Python (``_Dumper``).

One module over 500 lines on purpose: the loader, the builder and the dumper share the source
map, the bounds and the refusal wording, and the export's bytes must be what the loader reads back.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Final, Protocol

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError
from yaml.resolver import Resolver

from core.numbers import BOUND_TEXT, is_bounded
from core.text import encodable, find_nul, find_unencodable, show_path
from engine.document.diagnostics import Diagnostic, Severity
from engine.document.paths import AGENTS, Path, format_path
from engine.document.source import Mark, SourceMap

WEB_MAX_BYTES: Final = 1024 * 1024
CLI_MAX_BYTES: Final = 64 * 1024 * 1024
#: Nodes a document may hold once aliases are expanded: "billion laughs" files stop here.
MAX_NODES: Final = 100_000
#: Nesting levels (aliases expanded): far above any policy, well below Python's recursion limit.
MAX_DEPTH: Final = 100
HEADER_FORMAT_LINE: Final = "# traitdeck-format: 1\n"
EMPTY_POLICY: Final[dict[str, Any]] = {"surfaces": {"as_consumer": {"agents": {}}}}

_WARNINGS = frozenset({"format-version"})
#: Worth knowing once, on import, but nothing to fix: a hand-edited export (DESIGN §2.9).
_INFO = frozenset({"hash-mismatch"})
_SHAPE_HINT = "start from `surfaces: {as_consumer: {agents: {}}}`"
_REEXPORT_HINT = "export it again from Traitdeck, or ignore this if the edit was intended"
_HEADER = re.compile(r"# traitdeck-format: 1\r?\n# sha256: ([0-9a-f]{64})\r?\n")
_FORMAT_LINE = re.compile(r"# traitdeck-format:[ \t]*(\S*)")
_TAGS = "tag:yaml.org,2002:"
_MAP_TAG, _SEQ_TAG, _STR_TAG = f"{_TAGS}map", f"{_TAGS}seq", f"{_TAGS}str"
_MERGE_TAG, _VALUE_TAG = f"{_TAGS}merge", f"{_TAGS}value"
_INT_TAG = f"{_TAGS}int"
#: The longest integer text read at all: any in-bound int, in any YAML 1.1 notation (``0b`` +
#: 60 bits, sexagesimal, ``_`` separators), fits.
_MAX_INT_TEXT: Final = 100
# PyYAML names tokens in its messages; people read words.
_TOKEN_WORDS = {
    "'?'": "a mapping key",
    "'<stream end>'": "the end of the text",
    "<block end>": "the end of the indented block",
}
_FAILED: Final = object()  # a scalar or key that could not be built (already reported)


@dataclass
class LoadedPolicy:
    """What reading policy text gave: the data (``None`` when refused) and what was found."""

    data: Any
    source: SourceMap
    diagnostics: list[Diagnostic]
    refused: bool
    header_hash: str | None = None


def _mark(mark: yaml.Mark | None) -> Mark | None:
    return None if mark is None else (mark.line + 1, mark.column + 1)


def _diagnostic(
    code: str, message: str, hint: str, path: Path = (), at: Mark | Node | None = None
) -> Diagnostic:
    severity = (
        Severity.INFO
        if code in _INFO
        else Severity.WARNING
        if code in _WARNINGS
        else Severity.ERROR
    )
    line, column = (_mark(at.start_mark) if isinstance(at, Node) else at) or (None, None)
    return Diagnostic(severity, code, format_path(path), line, column, message, hint)


class _Refusal(Exception):
    """Stops loading at once: going on would cost too much or never end."""

    def __init__(self, code: str, message: str, hint: str, at: Mark | Node | None) -> None:
        super().__init__(message)
        self.diagnostic = _diagnostic(code, message, hint, (), at)


def _too_deep(at: Mark | Node | None) -> _Refusal:
    message = f"the document nests more than {MAX_DEPTH} levels deep (aliases expanded)"
    return _Refusal("yaml-too-large", message, "flatten the structure", at)


def _position(text: str, index: int) -> Mark:
    return (text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index))


def _clip(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAGS) if tag.startswith(_TAGS) else tag


class _ReadAgain(Exception):
    """libyaml would read this text differently from PyYAML: read it again in pure Python."""


class _BoundedComposer(Composer):
    """PyYAML's composer, bounding nesting and remembering anchor names.

    Composing stays in Python whichever parser gives the events: libyaml's own C composer
    recurses in C once per level and crashes the process (a segfault, not an exception) on
    ~100k nested brackets, a text well under the web's size limit.
    """

    depth = 0
    #: Nodes composed (each once, however often aliased) and aliases met.
    composed = aliases = 0
    anchor_names: dict[int, str]

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """PyYAML's ``Composer.compose_node`` and its sequence and mapping steps in one method
        (the same nodes, marks and errors; SafeLoader has no path resolvers to descend), which
        also bounds the depth: the composer recurses once per level, so stop well before
        Python's recursion limit does."""
        event = self.peek_event()  # type: ignore[attr-defined]
        if self.depth >= MAX_DEPTH:
            raise _too_deep(_mark(event.start_mark))
        anchors: dict[str, Node] = self.anchors
        anchor = event.anchor
        if isinstance(event, yaml.AliasEvent):
            self.get_event()  # type: ignore[attr-defined]
            self.aliases += 1
            if anchor not in anchors:
                message = f"found undefined alias {anchor!r}"
                raise yaml.composer.ComposerError(None, None, message, event.start_mark)  # type: ignore[arg-type]
            return anchors[anchor]
        if anchor is not None and anchor in anchors:
            raise yaml.composer.ComposerError(
                f"found duplicate anchor {anchor!r}; first occurrence",
                anchors[anchor].start_mark,
                "second occurrence",
                event.start_mark,
            )
        self.composed += 1  # every other event makes one new node
        node: Node
        if isinstance(event, yaml.ScalarEvent):
            node = self.compose_scalar_node(anchor)
        else:
            self.get_event()  # type: ignore[attr-defined]
            sequence = isinstance(event, yaml.SequenceStartEvent)
            tag = event.tag
            if tag is None or tag == "!":
                kind = SequenceNode if sequence else MappingNode
                tag = self.resolve(kind, None, event.implicit)  # type: ignore[attr-defined]
            node = (SequenceNode if sequence else MappingNode)(
                tag, [], event.start_mark, None, flow_style=event.flow_style
            )
            if anchor is not None:
                anchors[anchor] = node
            items: list[Any] = node.value
            end = yaml.SequenceEndEvent if sequence else yaml.MappingEndEvent
            check_event = self.check_event  # type: ignore[attr-defined]
            self.depth += 1
            try:
                if sequence:
                    while not check_event(end):
                        items.append(self.compose_node(node, len(items)))
                else:
                    while not check_event(end):
                        key = self.compose_node(node, None)
                        items.append((key, self.compose_node(node, key)))
            finally:
                self.depth -= 1
            node.end_mark = self.get_event().end_mark  # type: ignore[attr-defined]
        if anchor is not None:
            self.anchor_names[id(node)] = anchor
        return node


class _Loader(_BoundedComposer, yaml.SafeLoader):
    """The pure-Python SafeLoader: the reference every diagnostic is worded by."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.anchor_names = {}


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _CLoader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        """Events from libyaml's C scanner and parser (several times faster than PyYAML's),
        composed and built by the same Python code as ``_Loader``'s."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.anchor_names = {}

        def compose_scalar_node(self, anchor: dict[Any, Node]) -> ScalarNode:
            event = self.peek_event()
            if isinstance(event, yaml.ScalarEvent) and not event.value and not event.style:
                # An empty value (`key:`): libyaml marks it where the next token starts, PyYAML
                # right after the indicator; diagnostics point at it, so PyYAML must place it.
                raise _ReadAgain
            return super().compose_scalar_node(anchor)

    _LOADERS: tuple[type[_BoundedComposer], ...] = (_CLoader, _Loader)
else:  # PyYAML built without libyaml: the pure-Python parser reads everything.
    _LOADERS = (_Loader,)


class _Loading(Protocol):
    """What ``_Builder`` needs of a loader, whichever parser feeds it."""

    anchor_names: dict[int, str]

    def construct_object(self, node: Node, deep: bool = False) -> Any: ...


class _Builder:
    """Builds Python values from composed nodes, recording positions and reporting data loss."""

    def __init__(self, loader: _Loading, max_nodes: int, distinct: int = 0) -> None:
        self.loader, self.max_nodes, self.distinct = loader, max_nodes + distinct, distinct
        self.source = SourceMap()
        self.errors: list[Diagnostic] = []
        self._reported: set[tuple[str, int | None, int | None]] = set()
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height)
        self._active: set[int] = set()  # ids of the nodes being measured: a cycle's way back

    def measure(self, node: Node, depth: int = 0) -> tuple[int, int]:
        """Count nodes with aliases expanded, without expanding them (each node is sized once)."""
        if depth >= MAX_DEPTH:  # the root is level 1, as for the composer
            raise _too_deep(node)
        known = self._measured.get(id(node))
        if known is None:
            if id(node) in self._active:
                name = self.loader.anchor_names.get(id(node), "?")
                message = f"recursive alias: the anchor `&{name}` is used inside itself"
                hint = f"replace the inner `*{name}` with the values it should hold"
                raise _Refusal("yaml-syntax", message, hint, node)
            self._active.add(id(node))
            nodes, height = 1, 0
            children = node.value if isinstance(node, SequenceNode) else []
            if isinstance(node, MappingNode):
                children = [child for pair in node.value for child in pair]
            for child in children:
                child_nodes, child_height = self.measure(child, depth + 1)
                nodes, height = nodes + child_nodes, max(height, child_height + 1)
                if nodes > self.max_nodes:
                    limit = self.max_nodes - self.distinct
                    message = f"aliases expand to more than {limit} nodes beyond the text itself"
                    hint = "write fewer aliases of large anchors: each alias copies its anchor"
                    raise _Refusal("yaml-too-large", message, hint, node)
            self._active.discard(id(node))
            known = self._measured[id(node)] = (nodes, height)
        if depth + known[1] >= MAX_DEPTH:
            raise _too_deep(node)
        return known

    def fail(self, code: str, message: str, hint: str, path: Path, node: Node) -> object:
        diagnostic = _diagnostic(code, message, hint, path, node)
        # An anchor is built once per alias: report each problem in the text only once.
        where = (code, diagnostic.line, diagnostic.column)
        if where not in self._reported:
            self._reported.add(where)
            self.errors.append(diagnostic)
        return _FAILED

    def build(self, node: Node, path: Path) -> Any:
        """The Python value of ``node``; aliases give equal, separate copies."""
        if (at := _mark(node.start_mark)) is not None:
            self.source.values[path] = at
        if isinstance(node, ScalarNode):
            value = self._scalar(node, path)
            return None if value is _FAILED else value
        if node.tag != (_SEQ_TAG if isinstance(node, SequenceNode) else _MAP_TAG):
            message = f"the tag `{_short_tag(node.tag)}` is not supported on a list or mapping"
            hint = "remove the tag: Traitdeck reads plain mappings, lists and values"
            self.fail("yaml-syntax", message, hint, path, node)
            return None
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]

    def _scalar(self, node: ScalarNode, path: Path) -> Any:
        if node.tag == _STR_TAG:
            return node.value  # what SafeLoader's str constructor returns, at a fraction the cost
        if node.tag == _INT_TAG and len(node.value) > _MAX_INT_TEXT:
            # Checked before PyYAML converts: `0b1` + 100,000 zeros or a 59:59:… chain would
            # build an int no computation (or ``repr``) survives.
            return self._too_large(node, path)
        try:
            # SafeLoader's own constructors: the same ints, floats, dates… as yaml.safe_load.
            value = self.loader.construct_object(node, deep=True)
            return value if is_bounded(value) else self._too_large(node, path)
        except Exception as exc:  # bad dates raise ValueError, unknown tags ConstructorError
            short = _short_tag(node.tag)
            if node.tag not in yaml.SafeLoader.yaml_constructors:
                message, hint = f"the tag `{short}` is not supported", "remove the tag"
            else:
                reason = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else exc
                message = f"`{_clip(node.value)}` cannot be read as `{short}`: {reason}"
                hint = "correct it, or put it in quotes to keep it as text"
            return self.fail("yaml-syntax", message, hint, path, node)

    def _too_large(self, node: ScalarNode, path: Path) -> object:
        message = f"`{_clip(node.value)}` is too large a number: {BOUND_TEXT}"
        return self.fail("number-too-large", message, "write a smaller number", path, node)

    def _key(self, node: Node, path: Path) -> Any:
        if not isinstance(node, ScalarNode):
            kind = "list" if isinstance(node, SequenceNode) else "mapping"
            message = f"a {kind} is used as a mapping key: keys must be single values"
            return self.fail("yaml-syntax", message, "use a text key", path, node)
        if node.tag == _VALUE_TAG:
            return node.value  # yaml.safe_load reads a bare `=` key as text
        return self._scalar(node, path)

    def _merged(self, node: Node, path: Path) -> dict[Any, Any]:
        """What a merge key ``<<: node`` brings into the mapping at ``path``."""
        sources = [node] if isinstance(node, MappingNode) else []
        if isinstance(node, SequenceNode) and all(isinstance(n, MappingNode) for n in node.value):
            sources = list(reversed(node.value))  # earlier mappings win, so they come last
        if not sources:
            message = "a merge key `<<` takes a mapping or a list of mappings"
            hint = "merge an anchored mapping: `<<: *defaults`"
            self.fail("yaml-syntax", message, hint, path, node)
        merged: dict[Any, Any] = {}
        for source in sources:
            built = self.build(source, path)
            merged.update(built if isinstance(built, dict) else {})
        return merged

    def _mapping(self, node: MappingNode, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        # Merged keys come first and explicit keys override them, as with yaml.safe_load.
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                result.update(self._merged(value_node, path))
        if (at := _mark(node.start_mark)) is not None:  # merged mappings recorded their start
            self.source.values[path] = at
        first: dict[Any, Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG or (key := self._key(key_node, path)) is _FAILED:
                continue
            if key in first:
                self._duplicate(first[key], key_node, (*path, key))
            first.setdefault(key, key_node)
            if (key_at := _mark(key_node.start_mark)) is not None:
                self.source.keys[(*path, key)] = key_at
            result[key] = self.build(value_node, (*path, key))
        return result

    def _duplicate(self, first: Node, second: Node, path: Path) -> None:
        line = (_mark(first.start_mark) or ("?",))[0]
        same = "" if first.value == second.value else f" (equal to `{_clip(first.value)}`)"
        message = (
            f"the key `{_clip(second.value)}` is repeated{same}; it first appears on line {line}, "
            "and YAML loaders silently keep only the last value"
        )
        hint = "remove one of them, or merge their contents under a single key"
        self.fail("duplicate-key", message, hint, path, second)


def _syntax_diagnostic(exc: yaml.YAMLError, text: str) -> Diagnostic:
    hint = "check the indentation and punctuation on this line and the one before"
    if isinstance(exc, ReaderError):
        character = exc.character if isinstance(exc.character, int) else ord(str(exc.character))
        message = f"the character U+{character:04X} is not allowed in YAML text"
        hint = "remove it; inside double quotes, write control characters as escapes like `\\t`"
        return _diagnostic("yaml-syntax", message, hint, (), _position(text, int(exc.position)))
    if not isinstance(exc, yaml.MarkedYAMLError):
        return _diagnostic("yaml-syntax", f"the text is not valid YAML: {exc}", hint)
    message = exc.problem or exc.context or "the text is not valid YAML"
    for token, words in _TOKEN_WORDS.items():
        message = message.replace(token, words)
    context = exc.context if exc.problem else None
    if "'\\t'" in message:
        message = "a tab character where YAML expects spaces"
        hint = "indent with spaces: YAML does not allow tabs for indentation"
    elif context and context.startswith("expected a single document"):
        message = f"{context}, {message}"
        hint = "keep one document per file: remove the extra `---` or `...` and what follows"
    elif context:
        where = f" on line {exc.context_mark.line + 1}" if exc.context_mark else ""
        message = f"{message} ({context}{where})"
    if "undefined alias" in message:
        hint = "define the anchor (`&name`) before its first use (`*name`)"
    elif "mapping values are not allowed" in message:
        hint = "quote a value that contains `: `, or fix the indentation"
    return _diagnostic(
        "yaml-syntax", message, hint, (), _mark(exc.problem_mark or exc.context_mark)
    )


def _decode(text: str | bytes, max_bytes: int) -> str | Diagnostic:
    """The text to parse, or the diagnostic refusing it (too large, not UTF-8)."""
    hint = "remove unused parts of the policy"
    if max_bytes < CLI_MAX_BYTES:
        hint = "import it with the `traitdeck` command line, which reads up to 64 MiB"
    too_large = _diagnostic("yaml-too-large", f"the text is over {max_bytes} bytes", hint)
    not_utf8, utf8_hint = "the file is not UTF-8 text", "save the file as UTF-8 text"
    if isinstance(text, str):
        if len(text) > max_bytes:  # every character takes at least one byte: skip encoding
            return too_large
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:  # lone surrogates
            return _diagnostic("yaml-syntax", not_utf8, utf8_hint, (), _position(text, exc.start))
        decoded = text
    else:
        size = len(text)
        try:
            decoded = "" if size > max_bytes else bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            before = bytes(text[: exc.start]).decode("utf-8", "replace")
            at = _position(before, len(before))
            return _diagnostic("yaml-syntax", not_utf8, utf8_hint, (), at)
    return too_large if size > max_bytes else decoded.removeprefix("\ufeff")


def split_header(text: str) -> tuple[str | None, str]:
    """The sha256 of a Traitdeck export header and the body below it; ``(None, text)`` if none."""
    match = _HEADER.match(text)
    return (match.group(1), text[match.end() :]) if match else (None, text)


def body_hash(body: str) -> str:
    """The sha256 hex digest of the body's UTF-8 bytes (what an export header carries)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _read_header(text: str) -> tuple[str | None, list[Diagnostic]]:
    header_hash, body = split_header(text)
    if header_hash is not None:
        if body_hash(body) == header_hash:
            return header_hash, []
        message = "the body no longer matches the header's sha256: it was edited since export"
        return header_hash, [_diagnostic("hash-mismatch", message, _REEXPORT_HINT, (), (2, 1))]
    declared = _FORMAT_LINE.match(text)
    if declared is not None and declared.group(1) != "1":
        version = declared.group(1) or "(none)"
        message = f"the file says traitdeck-format {version}; this Traitdeck understands format 1"
        hint = "check the imported policy carefully, or export it again in format 1"
        return None, [_diagnostic("format-version", message, hint, (), (1, 1))]
    if declared is not None and text.partition("\n")[2].startswith("# sha256:"):
        message = "the header's sha256 is not 64 lowercase hex digits: edits cannot be detected"
        return None, [_diagnostic("hash-mismatch", message, _REEXPORT_HINT, (), (2, 1))]
    return None, []


def _describe(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "empty" if value is None else "true/false"
    kinds = ((str, "text"), (int, "a number"), (float, "a number"), (list, "a list"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def _shape_error(data: Any, source: SourceMap) -> Diagnostic | None:
    if not isinstance(data, dict):
        message = f"the top of the file must be a mapping with `surfaces`, not {_describe(data)}"
        if not source.values:
            message = "the file is empty: it holds no policy"
        return _diagnostic("shape", message, _SHAPE_HINT, (), source.at_value(()))
    legacy = data.get("tools")
    if isinstance(legacy, dict) and isinstance(legacy.get("agents"), dict):
        surfaces = data.get("surfaces")
        consumer = surfaces.get("as_consumer") if isinstance(surfaces, dict) else None
        if not isinstance(consumer, dict) or "agents" not in consumer:
            # The legacy shape: the runtime still reads `tools.agents.<agent>: [connections]`.
            return None
    node: Any = data
    for depth in range(len(AGENTS)):
        path = AGENTS[: depth + 1]
        name = ".".join(path)
        if path[-1] not in node:
            message = f"`{name}` is missing: the runtime reads agents from `{'.'.join(AGENTS)}`"
            at = source.first_key(AGENTS[:depth])
            return _diagnostic("shape", message, _SHAPE_HINT, path, at)
        node = node[path[-1]]
        if not isinstance(node, dict):
            message = f"`{name}` must be a mapping, not {_describe(node)}"
            return _diagnostic("shape", message, _SHAPE_HINT, path, source.at_value(path))
    return None


def _compose_and_build(
    text: str, max_nodes: int, loader_class: type[_BoundedComposer]
) -> tuple[Any, SourceMap, list[Diagnostic]]:
    loader: Any = loader_class(text)  # type: ignore[call-arg]  # both loaders take the text
    try:
        root = loader.get_single_node()  # raises on a second document
        # The limit bounds what ALIASES add, not the size of the text itself: a large file
        # written out in full is bounded by max_bytes; a small one that expands is the attack.
        builder = _Builder(loader, max_nodes, loader.composed)
        if root is None:
            return None, builder.source, []
        if loader.aliases:
            # Refuses before anything is expanded. Without aliases the text is its own
            # expansion: max_bytes bounded its size and composing its depth.
            builder.measure(root)
        return builder.build(root, ()), builder.source, builder.errors
    finally:
        loader.dispose()


def _load_yaml(text: str, max_nodes: int) -> tuple[Any, SourceMap, list[Diagnostic]]:
    *fast, reference = _LOADERS
    if "\t" in text:
        # libyaml accepts tabs where PyYAML (and so the runtime's yaml.safe_load) refuses them,
        # e.g. after a value: "0\t". Exports never hold a raw tab (they escape it in quotes).
        fast = []
    for loader_class in fast:
        try:
            return _compose_and_build(text, max_nodes, loader_class)
        except _Refusal:
            raise  # decided by Traitdeck's own code on the same events: the same either way
        except Exception:
            # libyaml words its errors differently and places some elsewhere: text it cannot
            # read is read again in pure Python, whose diagnostic is the one users see.
            pass
    return _compose_and_build(text, max_nodes, reference)


def load_policy(
    text: str | bytes, *, max_bytes: int = WEB_MAX_BYTES, max_nodes: int = MAX_NODES
) -> LoadedPolicy:
    """Read policy text safely; never raises. Refused text has ``data=None`` and error diagnostics.

    Refused: over ``max_bytes``, aliases adding more than ``max_nodes`` nodes, not UTF-8, not
    YAML, a repeated key, or neither a ``surfaces.as_consumer.agents`` mapping nor the legacy
    ``tools.agents`` one. A Traitdeck export header whose hash does not match the body only
    warns (``hash-mismatch``).
    """
    return check_policy(load_document(text, max_bytes=max_bytes, max_nodes=max_nodes))


def load_document(
    text: str | bytes, *, max_bytes: int = WEB_MAX_BYTES, max_nodes: int = MAX_NODES
) -> LoadedPolicy:
    """Read any YAML document safely (no policy shape checked yet); never raises. ``data`` is
    what was read even when a diagnostic refuses it; ``refused`` says whether one does."""
    decoded = _decode(text, max_bytes)
    if isinstance(decoded, Diagnostic):
        return LoadedPolicy(None, SourceMap(), [decoded], True, None)
    header_hash, diagnostics = _read_header(decoded)
    data: Any = None
    source = SourceMap()
    try:
        data, source, errors = _load_yaml(decoded, max_nodes)
        diagnostics += errors
    except _Refusal as refusal:
        diagnostics.append(refusal.diagnostic)
    except yaml.YAMLError as exc:
        diagnostics.append(_syntax_diagnostic(exc, decoded))
    except RecursionError:
        diagnostics.append(_too_deep(None).diagnostic)
    except Exception as exc:
        # Import answers with diagnostics, never a server error (DESIGN §6), whatever PyYAML does.
        message = f"the text cannot be read as YAML: {exc}"
        diagnostics.append(_diagnostic("yaml-syntax", message, "check the file is a YAML policy"))
    refused = any(d.severity is Severity.ERROR for d in diagnostics)
    return LoadedPolicy(data, source, diagnostics, refused, header_hash)


def compose_node(text: str) -> Node | None:
    """The node tree of ``text`` (source marks kept), for editing text in place. Only for text
    :func:`load_document` has already accepted: composed by the same bounded composer (depth),
    the size and alias checks were made there. The one place besides ``load_document`` the
    product composes YAML (``tests/hardening/test_product_sources.py`` holds it to that)."""
    loader = _Loader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def scalar_value(node: ScalarNode) -> Any:
    """What ``yaml.safe_load`` makes of one scalar node (an int key, a date …)."""
    return _Loader("").construct_object(node)


def check_policy(loaded: LoadedPolicy) -> LoadedPolicy:
    """``loaded`` refused unless its data is a policy: the agents mapping where the runtime
    reads it, and no text a page or database could not hold. Refused data is dropped."""
    diagnostics = list(loaded.diagnostics)
    if not loaded.refused:
        shape = _shape_error(loaded.data, loaded.source)
        diagnostics += [shape] if shape else _encoding_errors(loaded.data, loaded.source)
    refused = any(d.severity is Severity.ERROR for d in diagnostics)
    data = None if refused else loaded.data
    return LoadedPolicy(data, loaded.source, diagnostics, refused, loaded.header_hash)


def _encoding_errors(data: Any, source: SourceMap) -> list[Diagnostic]:
    """A ``"\\ud800"`` escape loads as a lone surrogate: text no page, export or database can
    write; a ``"\\0"`` escape loads as a NUL character, which PostgreSQL cannot store. Such a
    policy is refused (``text-encoding``) rather than stored."""
    found = find_unencodable(data)
    what = "text that cannot be encoded as UTF-8 (a lone surrogate, from an escape like \\ud800)"
    hint = "write the character itself, or remove the escape"
    if found is None:
        # A "\\0" or "\\x00" escape: valid UTF-8, but no database text column can store it.
        found = find_nul(data)
        what = "a NUL character (from an escape like \\0), which the database cannot store"
        hint = "remove the escape"
    if found is None:
        return []
    path, is_key = found
    # The diagnostic is shown on pages: it names the key with the escape, not the character.
    shown = tuple(
        ascii(key)[1:-1] if isinstance(key, str) and not encodable(key) else key for key in path
    )
    return [
        _diagnostic(
            "text-encoding",
            f"the {'key' if is_key else 'value'} at {show_path(path) or 'the root'} holds {what}",
            hint,
            shown,
            source.at_key(path) if is_key else source.at_value(path),
        )
    ]


class _Dumper(yaml.SafeDumper):
    """SafeDumper for policy bodies: no anchors, indented lists, multi-line text as blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        # Objects shared in memory are written out in full, as a person would write them.
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Lists are indented below their key, like DESIGN §3, not flush with it (PyYAML's default).
        super().increase_indent(flow, False)


def _represent_str(dumper: _Dumper, data: str) -> ScalarNode:
    # Multi-line text reads best as a literal block; the emitter itself falls back to quotes
    # whenever a block could not give the same text back (trailing spaces, control characters).
    style = "|" if "\n" in data else None
    if any(ch in data for ch in "\x85\u2028\u2029"):
        # PyYAML writes these line breaks raw (and loses them) in every style but double quotes.
        style = '"'
    return dumper.represent_scalar(_STR_TAG, data, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_body(data: Any) -> str:
    """Deterministic YAML for ``data``, keys in their order, that loads back equal; ends in \\n."""
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        indent=2,
        width=float("inf"),  # never fold long text: the body stays line-for-line diffable
    )


def export_text(data: Any) -> str:
    """The export: ``# traitdeck-format: 1``, ``# sha256: <hex of the body>``, then the body."""
    return export_of_body(dump_body(data))


def export_of_body(body: str) -> str:
    """The export of a body ``dump_body`` made (its header added; nothing dumped again)."""
    return f"{HEADER_FORMAT_LINE}# sha256: {body_hash(body)}\n{body}"


def agent_export_text(data: Any, agent: str) -> str:
    """The runtime's file for one agent: ``surfaces.as_consumer`` with only that agent (§6).

    Raises ``KeyError`` when the agent does not exist.
    """
    as_consumer = data["surfaces"]["as_consumer"]
    agents = as_consumer["agents"]
    if agent not in agents:
        raise KeyError(agent)
    kept = {
        key: {agent: agents[agent]} if key == "agents" else value
        for key, value in as_consumer.items()
    }
    return export_text({"surfaces": {"as_consumer": kept}})


def empty_policy() -> dict[str, Any]:
    """A fresh copy of the empty policy a new instance starts from."""
    return copy.deepcopy(EMPTY_POLICY)
