"""Writing a policy back into a KDCube bundles descriptor, changing only the lines it must.

The descriptor is the user's file under version control: comments, quoting, key order, blank
lines and indentation are theirs. So the new text is the old text with edits spliced in where a
value differs (a changed scalar keeps its quoting style and the comment after it), keys and list
items added or removed line by line; nothing else is re-emitted. The result is read back and
must give exactly the descriptor with the new owned subtree; if splicing cannot give that (an
anchor shared with other places, a mapping key on a ``- `` line that must go), the owned subtree
is written out whole, and if even that cannot, the export is refused.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from engine.document.diagnostics import Diagnostic, Severity
from engine.document.paths import Path
from policy.domain.descriptors import (
    ITEMS,
    BundleItem,
    DescriptorError,
    changed_outside_owned,
    descriptor_items,
    is_descriptor,
    owned_path,
)
from policy.domain.yaml_io import (
    CLI_MAX_BYTES,
    MAX_NODES,
    compose_node,
    dump_body,
    load_document,
    scalar_value,
)


class ExportRefused(Exception):
    """The policy cannot be written into this descriptor; ``diagnostics`` say why."""

    def __init__(self, message: str, diagnostics: list[Diagnostic]) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


class _CannotSplice(Exception):
    """This node's text cannot be edited in place: its parent writes it out whole."""


@dataclass(frozen=True)
class DescriptorExport:
    """The descriptor text with the policy written in, and the bundle it went into."""

    text: str
    bundle_id: str
    #: Where the owned subtree is in the item: ``(container, *path)``.
    location: Path


def _same(a: Any, b: Any) -> bool:
    """Equal as YAML values: ``1``, ``1.0`` and ``true`` differ; mapping order does not count."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _choose(data: Any, bundle: str | None) -> BundleItem:
    items = descriptor_items(data)
    if bundle is not None:
        for item in items:
            if item.bundle_id == bundle.strip():
                return item
        every = tuple(i.bundle_id for i in items)
        ids = ", ".join(every) or "none"
        raise DescriptorError("unknown", f"the descriptor has no bundle {bundle!r} ({ids})", every)
    with_policy = [item for item in items if item.has_policy]
    candidates = with_policy or items
    if len(candidates) == 1:
        return candidates[0]
    listed = ", ".join(item.bundle_id for item in candidates) or "none"
    kind = "ambiguous" if candidates else "malformed"
    raise DescriptorError(
        kind,
        f"name the bundle to write into with --bundle ({listed})",
        tuple(item.bundle_id for item in candidates),
    )


def _refusal(code: str, message: str, hint: str) -> ExportRefused:
    return ExportRefused(message, [Diagnostic(Severity.ERROR, code, "", None, None, message, hint)])


def export_into_descriptor(
    descriptor: str | bytes, draft: Mapping[Any, Any], *, bundle: str | None = None
) -> DescriptorExport:
    """``descriptor`` with ``draft``'s owned subtree written into the bundle ``bundle`` (or its
    only bundle with a policy, or its only bundle). Raises :class:`DescriptorError` when no
    bundle can be chosen and :class:`ExportRefused` when the draft changed keys outside the owned
    subtree or the text cannot be written."""
    loaded = load_document(descriptor, max_bytes=CLI_MAX_BYTES, max_nodes=MAX_NODES)
    if loaded.refused:
        raise ExportRefused("the descriptor cannot be read", loaded.diagnostics)
    if not is_descriptor(loaded.data):
        raise DescriptorError("malformed", "the file is not a KDCube bundles descriptor")
    text = descriptor if isinstance(descriptor, str) else descriptor.decode("utf-8")
    text = text.removeprefix("\ufeff")
    item = _choose(loaded.data, bundle)
    props = dict(item.props or {})
    # Keys the draft does not hold at all at the top level (or under `surfaces`) are not its
    # to change: a draft made in Traitdeck need not carry the bundle's UI settings.
    carried = {key: value for key, value in props.items() if key in draft}
    if isinstance(carried.get("surfaces"), Mapping) and isinstance(draft.get("surfaces"), Mapping):
        surfaces = draft["surfaces"]
        carried["surfaces"] = {k: v for k, v in carried["surfaces"].items() if k in surfaces}
    changed = changed_outside_owned(carried, draft)
    if changed:
        message = (
            "the draft changed keys outside the policy Traitdeck writes "
            f"({', '.join(changed)}); they would not be written into the descriptor"
        )
        raise _refusal(
            "outside-owned",
            message,
            "Edit those keys in the descriptor itself, or import the descriptor again.",
        )
    location = item.owned_location
    new_owned = copy.deepcopy(_get(draft, owned_path(draft)))
    expected = copy.deepcopy(loaded.data)
    node: Any = _get(expected, (*ITEMS, item.index))
    for key in location[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[location[-1]] = new_owned
    root = compose_node(text)
    if root is None:  # not reachable: a descriptor is a mapping
        raise DescriptorError("malformed", "the descriptor is empty")
    out = _Splicer(text).result(root, loaded.data, expected)
    if out is None:
        target = (*ITEMS, item.index, *location)
        out = _Splicer(text).whole(root, target, loaded.data, expected)
    if out is None:
        raise _refusal(
            "descriptor-unwritable",
            "the policy cannot be written into this descriptor without changing other lines "
            "(anchors or aliases around the policy?)",
            "Write the policy in by hand, or remove the anchors around it.",
        )
    return DescriptorExport(out, item.bundle_id, location)


def _get(data: Any, path: Path) -> Any:
    for key in path:
        data = data[key] if isinstance(data, Mapping | list) else None
    return data


def _reads_as(text: str, expected: Any) -> bool:
    loaded = load_document(text, max_bytes=CLI_MAX_BYTES, max_nodes=MAX_NODES)
    return not loaded.refused and _same(loaded.data, expected)


class _Splicer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.edits: list[tuple[int, int, str]] = []

    def result(self, root: Node, old: Any, new: Any) -> str | None:
        try:
            self.patch(root, old, new, 0, inline=False)
        except _CannotSplice:
            return None
        out = self.apply()
        return out if _reads_as(out, new) else None

    def whole(self, root: Node, target: Path, old: Any, new: Any) -> str | None:
        """Write the node at ``target`` (or its nearest existing ancestor) out whole."""
        node, value_old, col = root, old, 0
        path: Path = ()
        for key in target:
            child = _child(node, key)
            if child is None or not isinstance(value_old, Mapping | list):
                break
            col = _key_column(node, key, self.text)
            node, value_old, path = child, value_old[key], (*path, key)
        try:
            inline = bool(path) and isinstance(path[-1], int)
            self.replace(node, _get(new, path), col, inline=inline)
        except _CannotSplice:
            return None
        out = self.apply()
        return out if _reads_as(out, new) else None

    def apply(self) -> str:
        out = self.text
        for start, end, replacement in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            out = out[:start] + replacement + out[end:]
        return out

    # --- positions ----------------------------------------------------------------------------

    def line_start(self, index: int) -> int:
        return self.text.rfind("\n", 0, index) + 1

    def line_after(self, index: int) -> int:
        found = self.text.find("\n", index)
        return len(self.text) if found < 0 else found + 1

    def content_end(self, node: Node) -> int:
        """Just past the node's last character that is not a trailing comment or blank line."""
        if isinstance(node, MappingNode | SequenceNode) and not node.flow_style and node.value:
            return self.block_end(node)
        end = node.end_mark.index
        while end > node.start_mark.index and self.text[end - 1] in " \t\r\n":
            end -= 1
        return end

    def block_end(self, node: Node) -> int:
        """The end of a block collection's last content line, found by indentation: the block
        holds every later line indented at least as far as it starts (for a sequence, lines at
        its column only when they start another ``-`` item). Read from the text, because the
        nodes of an alias are its anchor's, positions included."""
        column = node.start_mark.column
        start = self.line_start(node.start_mark.index)
        end = self.line_after(start) - 1
        position = self.line_after(start)
        while position < len(self.text):
            line_end = self.line_after(position)
            line = self.text[position:line_end].rstrip("\r\n")
            stripped = line.lstrip(" ")
            if stripped and not stripped.startswith("#"):
                indent = len(line) - len(stripped)
                if indent < column:
                    break
                another_item = stripped == "-" or stripped.startswith("- ")
                if indent == column and isinstance(node, SequenceNode) and not another_item:
                    break
                end = position + len(line)
            position = line_end
        while end > node.start_mark.index and self.text[end - 1] in " \t\r":
            end -= 1
        return end

    def is_alias(self, key_or_previous: Node | None, node: Node) -> bool:
        """The value stands for an anchor written earlier (its node is the anchor's)."""
        return key_or_previous is not None and node.start_mark.index <= (
            key_or_previous.start_mark.index
        )

    def own_line(self, node: Node) -> bool:
        start = node.start_mark.index
        return not self.text[self.line_start(start) : start].strip()

    # --- edits --------------------------------------------------------------------------------

    def patch(
        self, node: Node, old: Any, new: Any, col: int, *, inline: bool, flow: bool = False
    ) -> None:
        """Edit ``node`` (holding ``old``) to hold ``new``. ``col``: the column of the key (or
        ``-``) that owns it; ``inline``: it is a list item written after its ``-``; ``flow``:
        it is inside a flow collection, where only one-line text fits."""
        if _same(old, new):
            return
        if isinstance(node, ScalarNode) and not isinstance(new, dict | list):
            self.edits.append((node.start_mark.index, node.end_mark.index, _scalar(new, node)))
            return
        if isinstance(node, MappingNode | SequenceNode) and (flow or node.flow_style):
            # Inside a flow collection: values edited in place while its shape stays, so a
            # trait changed in `{a: {strategy: [x]}}` changes that word only.
            if self.patch_flow(node, old, new):
                return
            self.edits.append((node.start_mark.index, node.end_mark.index, _flow(new)))
            return
        if flow:
            self.edits.append((node.start_mark.index, node.end_mark.index, _flow(new)))
            return
        block = isinstance(node, MappingNode | SequenceNode) and not node.flow_style
        if block and isinstance(node, MappingNode) and isinstance(new, dict):
            self.patch_mapping(node, old, new)
        elif block and isinstance(node, SequenceNode) and isinstance(new, list) and new:
            self.patch_sequence(node, old, new)
        else:
            self.replace(node, new, col, inline=inline)

    def patch_flow(self, node: Node, old: Any, new: Any) -> bool:
        """Edit a flow collection's values in place; False when its shape changes."""
        if isinstance(node, MappingNode) and isinstance(old, dict) and isinstance(new, dict):
            if list(old) != list(new) or len(node.value) != len(old):
                return False
            for key_node, _value in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag.endswith(":merge"):
                    return False
            for (_key_node, value_node), key in zip(node.value, old, strict=True):
                self.patch(value_node, old[key], new[key], 0, inline=False, flow=True)
            return True
        if isinstance(node, SequenceNode) and isinstance(old, list) and isinstance(new, list):
            if len(old) != len(new) or len(node.value) != len(old):
                return False
            for item, before, after in zip(node.value, old, new, strict=True):
                self.patch(item, before, after, 0, inline=False, flow=True)
            return True
        return False

    def replace(self, node: Node, new: Any, col: int, *, inline: bool) -> None:
        start, end = node.start_mark.index, self.content_end(node)
        block = isinstance(node, MappingNode | SequenceNode) and not node.flow_style
        written_empty = (
            isinstance(node, ScalarNode)
            and node.value == ""
            or (isinstance(node, MappingNode | SequenceNode) and not node.value)
        )
        if not isinstance(new, dict | list) or not new or not (block or written_empty):
            # Written on one line as it was: `strategy: [exploration]` stays a flow list.
            self.edits.append((start, end, _flow(new)))
            return
        body = dump_body(new).rstrip("\n")
        lines = body.split("\n")
        if inline or block:
            # The node starts where its first line goes: later lines align under it.
            indent = " " * node.start_mark.column
            text = "\n".join([lines[0], *(indent + line for line in lines[1:])])
        else:
            indent = " " * (col + 2)
            text = "\n" + "\n".join(indent + line for line in lines)
            # `key: value` → `key:` and the block below: drop the space before the old value.
            while start > 0 and self.text[start - 1] == " ":
                start -= 1
        self.edits.append((start, end, text))

    def patch_mapping(self, node: MappingNode, old: Any, new: dict[Any, Any]) -> None:
        pairs: list[tuple[Any, Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, ScalarNode):
                raise _CannotSplice
            key = key_node.value
            if key_node.tag != "tag:yaml.org,2002:str":
                key = scalar_value(key_node)
            pairs.append((key, key_node, value_node))
        if not isinstance(old, Mapping) or len(pairs) != len(old):
            raise _CannotSplice
        col = pairs[0][1].start_mark.column
        kept_end = 0
        for key, key_node, value_node in pairs:
            alias = self.is_alias(key_node, value_node)
            if alias and not _same(old.get(key), new.get(key, object())) and key in new:
                raise _CannotSplice
            end = self.line_after(
                key_node.end_mark.index if alias else self.content_end(value_node)
            )
            if alias and key in new:
                kept_end = end
                continue
            if key in new:
                self.patch(value_node, old[key], new[key], col, inline=False)
                kept_end = end
            elif not self.own_line(key_node):
                raise _CannotSplice
            else:
                self.edits.append((self.line_start(key_node.start_mark.index), end, ""))
        added = {key: value for key, value in new.items() if key not in old}
        if added:
            at = kept_end or self.line_after(self.content_end(node))
            if not kept_end and not self.own_line(pairs[0][1]):
                raise _CannotSplice
            body = dump_body(added)
            text = "".join(" " * col + line for line in body.splitlines(keepends=True))
            if at > 0 and self.text[at - 1] != "\n":
                text = "\n" + text
            self.edits.append((at, at, text))

    def patch_sequence(self, node: SequenceNode, old: Any, new: list[Any]) -> None:
        if not isinstance(old, list) or len(node.value) != len(old):
            raise _CannotSplice
        first = node.value[0]
        dash = self.text.rfind("-", self.line_start(first.start_mark.index), first.start_mark.index)
        if dash < 0:
            raise _CannotSplice
        col = dash - self.line_start(dash)
        previous: Node | None = None
        for index, item in enumerate(node.value):
            if self.is_alias(previous, item) or item.start_mark.index < first.start_mark.index:
                raise _CannotSplice
            previous = item
            if index < len(new):
                self.patch(item, old[index], new[index], col, inline=True)
            else:
                start = self.line_start(item.start_mark.index)
                if self.text[start : item.start_mark.index].strip() != "-":
                    raise _CannotSplice
                self.edits.append((start, self.line_after(self.content_end(item)), ""))
        if len(new) > len(old):
            at = self.line_after(self.content_end(node))
            body = dump_body(new[len(old) :])
            text = "".join(" " * col + line for line in body.splitlines(keepends=True))
            if at > 0 and self.text[at - 1] != "\n":
                text = "\n" + text
            self.edits.append((at, at, text))


def _child(node: Node, key: Any) -> Node | None:
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.value == key:
                found: Node = value_node
                return found
    if isinstance(node, SequenceNode) and isinstance(key, int) and key < len(node.value):
        item: Node = node.value[key]
        return item
    return None


def _key_column(node: Node, key: Any, text: str) -> int:
    if isinstance(node, MappingNode):
        for key_node, _value in node.value:
            if isinstance(key_node, ScalarNode) and key_node.value == key:
                return key_node.start_mark.column
    if isinstance(node, SequenceNode) and node.value:
        first = node.value[0].start_mark.index
        dash = text.rfind("-", text.rfind("\n", 0, first) + 1, first)
        return dash - (text.rfind("\n", 0, dash) + 1)
    return 0


def _flow(value: Any) -> str:
    """One line of YAML for ``value`` (flow style for collections)."""
    out = yaml.safe_dump(
        value, default_flow_style=True, allow_unicode=True, sort_keys=False, width=float("inf")
    )
    return out.removesuffix("\n...\n").rstrip("\n")


def _scalar(value: Any, old: ScalarNode) -> str:
    """``value`` written as the old scalar was: in its quotes when it was quoted."""
    if isinstance(value, str) and "\n" not in value:
        if old.style == '"':
            return json.dumps(value, ensure_ascii=False)
        if old.style == "'":
            return "'" + value.replace("'", "''") + "'"
    return _flow(value)
