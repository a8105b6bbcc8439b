"""KDCube bundle descriptors (``bundles.yaml``) and the part of a bundle's props Traitdeck owns.

A descriptor is ``bundles: {version: "1", items: [{id, config, …}]}``. Its items are read as
KDCube's file-backed descriptor store reads them (``infra/plugin/bundle_store.py``,
``_registry_from_payload`` and ``_split_bundles_and_props``):

- only ``bundles.items`` is read; a ``bundles`` that is not a mapping, or ``items`` that is not a
  list, holds no item; items that are not mappings are skipped;
- an item's id is ``str(id).strip()``; an item without one is skipped; so is an item with a
  ``git_url``/``git_ref``/``git_subdir``/``git_repo`` key (the store refuses those);
- the stored props are ``config``, with the legacy ``props`` merged **shallowly** on top when both
  are present (a top-level key of ``props`` replaces the same key of ``config``);
- a repeated id: the later item wins, but its props replace the earlier ones only when not empty.

``env:``/``file:`` references in the props stay text: the store resolves them into secrets when
it loads, Traitdeck never does.

**The owned subtree** is the one place of a bundle's props that holds its tool policy, and all
Traitdeck writes: ``surfaces.as_consumer`` when the props have it, else the legacy
``tools.agents``, else (nothing yet) ``surfaces.as_consumer`` is where a policy is created. In a
descriptor item it lies in ``props`` when ``props`` has the top-level key (``surfaces`` /
``tools``), else in ``config`` — the shallow merge decides which copy KDCube reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.document.paths import AS_CONSUMER, Path, format_path
from engine.document.source import SourceMap
from policy.domain.yaml_io import (
    MAX_NODES,
    WEB_MAX_BYTES,
    LoadedPolicy,
    check_policy,
    load_document,
)

LEGACY_AGENTS: Final[Path] = ("tools", "agents")
ITEMS: Final[Path] = ("bundles", "items")
CONFIG: Final = "config"
LEGACY_PROPS: Final = "props"
#: Item keys that make KDCube's store refuse the item (``_to_entry``).
_REFUSED_ITEM_KEYS: Final = frozenset({"git_url", "git_ref", "git_subdir", "git_repo"})


class DescriptorError(Exception):
    """No bundle can be read as asked. ``unknown``: the named bundle carries no policy (exit 1);
    ``none``/``ambiguous``/``malformed``/``props-with-bundle`` (a bundle named for text that is
    bundle props): the command cannot run as asked (exit 2, API 422)."""

    def __init__(self, kind: str, message: str, policy_ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.policy_ids = policy_ids

    @property
    def exit_code(self) -> int:
        return 1 if self.kind == "unknown" else 2


@dataclass(frozen=True)
class BundleItem:
    """One bundle of a descriptor as KDCube's store reads it."""

    bundle_id: str
    #: The index in ``bundles.items`` of the item whose props are used (the entry's otherwise).
    index: int
    #: The stored props (``config`` + legacy ``props`` merged shallowly); ``None``: none.
    props: Mapping[Any, Any] | None
    #: Top-level props key → the item key it was read from (``config`` or ``props``).
    sources: Mapping[Any, str]

    @property
    def owned(self) -> Path:
        """Where the owned subtree is (or would be created) in the props."""
        return owned_path(self.props or {})

    @property
    def owned_location(self) -> Path:
        """``(container, *path)``: where in the item the owned subtree is (or will be created):
        ``props`` when ``props`` holds its top-level key, else ``config``."""
        path = self.owned
        return (self.sources.get(path[0], CONFIG) if self.props else CONFIG, *path)

    @property
    def has_policy(self) -> bool:
        """The props hold an agents mapping where the runtime reads one."""
        return carries_policy(self.props)

    def item_path(self, props_path: Path) -> Path:
        """The descriptor path of a path into the props."""
        if not props_path:
            return (*ITEMS, self.index, self.sources.get(None, CONFIG))
        container = self.sources.get(props_path[0], CONFIG)
        return (*ITEMS, self.index, container, *props_path)


def _get(data: Any, path: Path) -> Any:
    node = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def owned_path(props: Mapping[Any, Any]) -> Path:
    """The path in a bundle's props of the subtree Traitdeck owns: ``surfaces.as_consumer`` when
    it is a mapping there, else ``tools.agents`` when that is one (the legacy shape), else
    ``surfaces.as_consumer`` (where a new policy goes)."""
    if isinstance(_get(props, AS_CONSUMER), Mapping):
        return AS_CONSUMER
    if isinstance(_get(props, LEGACY_AGENTS), Mapping):
        return LEGACY_AGENTS
    return AS_CONSUMER


def owned_subtree(props: Mapping[Any, Any]) -> Any:
    """The owned subtree of ``props`` (``None`` when it has none yet)."""
    return _get(props, owned_path(props))


def carries_policy(props: Any) -> bool:
    """``props`` hold agents where the runtime reads them (``surfaces.as_consumer.agents`` or the
    legacy ``tools.agents``)."""
    if not isinstance(props, Mapping):
        return False
    return isinstance(_get(props, (*AS_CONSUMER, "agents")), Mapping) or isinstance(
        _get(props, LEGACY_AGENTS), Mapping
    )


def with_owned(props: Mapping[Any, Any], draft: Mapping[Any, Any]) -> dict[Any, Any]:
    """``props`` with its owned subtree replaced by the draft's (created at
    ``surfaces.as_consumer`` when ``props`` has none); every other key kept as it is."""
    target = owned_path(props)
    source = owned_path(draft)
    out: dict[Any, Any] = dict(props)
    node = out
    for key in target[:-1]:
        child = node.get(key)
        node[key] = dict(child) if isinstance(child, Mapping) else {}
        node = node[key]
    node[target[-1]] = _get(draft, source)
    return out


def changed_outside_owned(base: Mapping[Any, Any], draft: Mapping[Any, Any]) -> list[str]:
    """The keys (as paths people read) where ``draft`` differs from ``base`` outside the owned
    subtree: what a write of the owned subtree alone would not carry. Creating the owned subtree
    where there was none changes nothing outside it."""
    changed: list[str] = []

    def walk(old: Any, new: Any, path: Path) -> None:
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            for key in [*old, *(k for k in new if k not in old)]:
                if key not in old or key not in new:
                    changed.append(_show((*path, key)))
                else:
                    walk(old[key], new[key], (*path, key))
        elif old != new or type(old) is not type(new):
            changed.append(_show(path))

    walk(_without_owned(base), _without_owned(draft), ())
    return changed


def _without_owned(props: Mapping[Any, Any]) -> dict[Any, Any]:
    """``props`` without the owned subtree, and without the mappings left empty by its removal."""
    path = owned_path(props)
    out = dict(props)
    chain = [out]
    for key in path[:-1]:
        child = chain[-1].get(key)
        if not isinstance(child, Mapping):
            return out
        chain[-1][key] = dict(child)
        chain.append(chain[-1][key])
    chain[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if not chain[depth]:
            chain[depth - 1].pop(path[depth - 1], None)
    return out


def _show(path: Path) -> str:
    return format_path(path) if path else "(the root)"


def is_descriptor(data: Any) -> bool:
    """The document is a bundles descriptor rather than one bundle's props."""
    if not isinstance(data, Mapping) or carries_policy(data) or "surfaces" in data:
        return False
    return "bundles" in data or isinstance(data.get("items"), list)


def descriptor_items(data: Any) -> list[BundleItem]:
    """The bundles of a descriptor, in first-appearance order, read as KDCube's file-backed
    store reads them (see the module docstring)."""
    root = data.get("bundles") if isinstance(data, Mapping) else None
    items = root.get("items") if isinstance(root, Mapping) else None
    found: dict[str, BundleItem] = {}
    for index, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, Mapping) or _REFUSED_ITEM_KEYS & set(item):
            continue
        bundle_id = str(item.get("id") or "").strip()
        if not bundle_id:
            continue
        props, sources = _split(item)
        earlier = found.get(bundle_id)
        if earlier is not None and not props:
            continue  # the store keeps the earlier props when the later item has none
        found[bundle_id] = BundleItem(bundle_id, index, props, sources)
    return list(found.values())


def _split(item: Mapping[Any, Any]) -> tuple[Mapping[Any, Any] | None, dict[Any, str]]:
    config, legacy = item.get(CONFIG), item.get(LEGACY_PROPS)
    if config is not None and legacy is not None:
        merged: dict[Any, Any] = {}
        sources: dict[Any, str] = {}
        for name, part in ((CONFIG, config), (LEGACY_PROPS, legacy)):
            if isinstance(part, Mapping):
                merged.update(part)
                sources.update(dict.fromkeys(part, name))
        return merged or None, sources
    name = CONFIG if config is not None else LEGACY_PROPS
    candidate = item.get(name)
    if not isinstance(candidate, Mapping) or not candidate:
        return None, {None: CONFIG}
    return candidate, {None: name, **dict.fromkeys(candidate, name)}


def policy_ids(items: list[BundleItem]) -> tuple[str, ...]:
    """The ids of the bundles that carry a policy, in descriptor order."""
    return tuple(item.bundle_id for item in items if item.has_policy)


def choose_bundle(data: Any, bundle_id: str | None) -> BundleItem:
    """The bundle to read: ``bundle_id`` when given (it must carry a policy), else the only one
    that carries a policy. Raises :class:`DescriptorError`."""
    items = descriptor_items(data)
    ids = policy_ids(items)
    listed = ", ".join(ids) or "none"
    if bundle_id is not None:
        for item in items:
            if item.bundle_id == bundle_id.strip() and item.has_policy:
                return item
        message = (
            f"the descriptor has no bundle {bundle_id!r} carrying a policy "
            f"(bundles with one: {listed})"
        )
        raise DescriptorError("unknown", message, ids)
    if len(ids) == 1:
        return next(item for item in items if item.bundle_id == ids[0])
    if ids:
        message = f"several bundles carry a policy: name one with --bundle ({listed})"
        raise DescriptorError("ambiguous", message, ids)
    if not items and isinstance(data, Mapping) and isinstance(data.get("items"), list):
        message = (
            "the descriptor has a top-level `items:` list; KDCube's file-backed store reads "
            "bundles only from `bundles.items`"
        )
        raise DescriptorError("malformed", message)
    if not items:
        message = "the descriptor has no bundle KDCube would read (`bundles.items` with ids)"
        raise DescriptorError("malformed", message)
    message = (
        "no bundle of the descriptor carries a policy (`surfaces.as_consumer.agents` or "
        f"`tools.agents` in its config): {', '.join(i.bundle_id for i in items)}"
    )
    raise DescriptorError("none", message)


def props_source(source: SourceMap, item: BundleItem) -> SourceMap:
    """The descriptor's positions re-keyed by paths into the item's props, so diagnostics about
    the props point into the descriptor the user gave."""
    out = SourceMap()
    base = (*ITEMS, item.index)
    for table, into in ((source.values, out.values), (source.keys, out.keys)):
        for path, mark in table.items():
            if len(path) <= len(base) + 1 or path[: len(base)] != base:
                continue
            container, rest = path[len(base)], path[len(base) + 1 :]
            if item.sources.get(rest[0], CONFIG) == container:
                into[rest] = mark
    root = source.values.get((*base, item.sources.get(None, CONFIG)))
    if root is not None:
        out.values[()] = root
    return out


@dataclass(frozen=True)
class PolicyText:
    """Policy text as read: the props (of the chosen bundle, for a descriptor) and findings."""

    loaded: LoadedPolicy
    #: The chosen bundle when the text was a descriptor.
    bundle: BundleItem | None = None
    #: Ids of the descriptor's bundles that carry a policy (for a picker).
    policy_ids: tuple[str, ...] = ()
    #: The whole descriptor as read (``None`` for bundle props).
    descriptor: Any = None


def read_policy_text(
    text: str | bytes,
    *,
    bundle: str | None = None,
    max_bytes: int = WEB_MAX_BYTES,
    max_nodes: int = MAX_NODES,
) -> PolicyText:
    """Read bundle props or a KDCube bundles descriptor. Text that is not YAML is refused with
    diagnostics as always; a descriptor whose bundle cannot be chosen raises
    :class:`DescriptorError`."""
    document = load_document(text, max_bytes=max_bytes, max_nodes=max_nodes)
    if document.refused or not is_descriptor(document.data):
        if bundle is not None and not document.refused:
            message = "--bundle names a bundle of a descriptor, but the file is bundle props"
            raise DescriptorError("props-with-bundle", message)
        return PolicyText(check_policy(document))
    data = document.data
    item = choose_bundle(data, bundle)
    props = dict(item.props or {})
    loaded = check_policy(
        LoadedPolicy(props, props_source(document.source, item), document.diagnostics, False)
    )
    return PolicyText(loaded, item, policy_ids(descriptor_items(data)), data)
