"""What Traitdeck writes into, and reads from, a KDCube bundle's props (its admin props API).

A KDCube runtime loads its bundle's code ``defaults`` deep-merged with the stored ``props``
(mappings merge; lists, scalars and ``null`` replace). KDCube's ``op: merge`` write merges the
same way into the stored props and never deletes a key. So a push is a merge patch of the owned
subtree alone (``policy.domain.descriptors``), where

- a list (an agent's ``tools``, a connection's ``allowed``) is sent whole: a tool left out of the
  list is gone (recorded: the runtime's loader then lists it no more);
- a mapping key the stored props hold and the version does not is sent as ``null``: the key stays
  with a null value, which the runtime's loader reads as absent (recorded for an agent and for an
  MCP server);
- a key the code defaults declare inside the owned subtree and the version does not cannot be
  removed by any props (the merge restores it): such a push is refused, naming the keys.

What GET returns has ``env:``/``file:`` secret references resolved. Traitdeck never sends a key
outside the owned subtree (nothing resolved is written back) and compares values at the paths
where the version holds a reference as "secret" on both sides.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.document.paths import AS_CONSUMER, Path, format_path
from policy.domain.descriptors import owned_path, owned_subtree

#: Shown (and compared) in place of a value that came from a secret reference.
SECRET: Final = "secret, not imported"


def deep_merge(base: Any, patch: Any) -> Any:
    """The runtime's merge (``_deep_merge_props``): mappings merge key by key; anything else in
    ``patch`` (lists, scalars, ``None``) replaces what ``base`` held."""
    if not isinstance(base, Mapping) or not isinstance(patch, Mapping):
        return patch
    out = dict(base)
    for key, value in patch.items():
        old = out.get(key)
        out[key] = deep_merge(old, value) if isinstance(old, Mapping) else value
    return out


def is_secret_ref(value: Any) -> bool:
    """A value KDCube's loader resolves into a secret (``_resolve_props_node``)."""
    if isinstance(value, str):
        text = value.strip()
        return text.startswith(("env:", "file:"))
    if isinstance(value, Mapping):
        return str(value.get("type", "")).strip().lower() == "ref" and "value" in value
    return False


def secret_paths(node: Any, path: Path = ()) -> list[Path]:
    """The paths of every secret reference under ``node``."""
    if is_secret_ref(node):
        return [path]
    out: list[Path] = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            out.extend(secret_paths(value, (*path, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(secret_paths(value, (*path, index)))
    return out


def masked(node: Any, paths: list[Path]) -> Any:
    """``node`` with the value at each of ``paths`` replaced by :data:`SECRET` (where present)."""
    out = json.loads(json.dumps(node))
    for path in paths:
        if not path:
            return SECRET
        parent: Any = out
        for key in path[:-1]:
            parent = _child(parent, key)
        if _child(parent, path[-1]) is not None:
            parent[path[-1]] = SECRET
    return out


def _child(node: Any, key: Any) -> Any:
    if isinstance(node, Mapping):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return None


#: Where a connection carries credentials: an MCP server's ``headers``/``env`` values, and any
#: value whose key names a secret. KDCube answers such a value resolved when the descriptor held a
#: reference, and Traitdeck cannot tell a resolved secret from a literal: it imports neither.
_SECRET_KEY = re.compile(r"(token|secret|password|passwd|api[_-]?key|authorization)", re.I)
_CREDENTIAL_MAPPINGS = frozenset({"headers", "env"})


def credential_paths(node: Any, path: Path = ()) -> list[Path]:
    """Paths of the text values in credential positions under ``node``."""
    out: list[Path] = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            here = (*path, key)
            if isinstance(value, str) and (
                _SECRET_KEY.search(str(key)) or (path and str(path[-1]) in _CREDENTIAL_MAPPINGS)
            ):
                if not value.startswith("${secret:"):  # a key of KDCube's secret store, not a value
                    out.append(here)
            else:
                out.extend(credential_paths(value, here))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(credential_paths(value, (*path, index)))
    return out


def value_at(node: Any, path: Path) -> Any:
    for key in path:
        node = _child(node, key)
    return node


def pulled_subtree(effective: Any, *known: Any) -> tuple[Any, list[str]]:
    """The owned subtree to import from what the runtime loads, and the paths shown as
    :data:`SECRET`. At a credential position the reference Traitdeck already holds there (in
    ``known``: the draft's, the version's subtree) is kept; without one the value becomes
    :data:`SECRET`, which a push refuses until a reference replaces it."""
    out = without_nulls(effective)
    secret: list[str] = []
    for path in credential_paths(out):
        ref = next((value_at(k, path) for k in known if is_secret_ref(value_at(k, path))), None)
        parent = value_at(out, path[:-1])
        parent[path[-1]] = ref if ref is not None else SECRET
        if ref is None:
            secret.append(format_path(path))
    return out, secret


def subtree_hash(subtree: Any) -> str:
    """A stable hash of a subtree (canonical JSON), shown as "hash …" and compared for drift."""
    text = json.dumps(subtree, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def version_subtree(policy: Mapping[str, Any]) -> Any:
    """The owned subtree of a Traitdeck policy (``surfaces.as_consumer``, or ``tools.agents``)."""
    return owned_subtree(policy)


def effective_subtree(defaults: Mapping[str, Any], props: Mapping[str, Any]) -> Any:
    """The owned subtree as the runtime loads it: ``defaults`` ← ``props``."""
    return owned_subtree(deep_merge(dict(defaults or {}), dict(props or {})))


def without_nulls(node: Any) -> Any:
    """``node`` with every mapping key whose value is ``None`` left out: the runtime's loader
    reads a null agent, connection list or server as absent (recorded)."""
    if isinstance(node, Mapping):
        return {k: without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [without_nulls(v) for v in node]
    return node


def comparable(subtree: Any, secrets: list[Path]) -> Any:
    """What two owned subtrees are compared on: nulls as absent, secrets masked."""
    return masked(without_nulls(subtree), secrets)


def removal_patch(current: Any, version: Any) -> Any:
    """The merge patch that turns ``current`` (the stored owned subtree) into ``version``:
    the version itself, plus ``None`` for every mapping key ``current`` holds that the version
    does not (recursively where both hold a mapping)."""
    if not isinstance(current, Mapping) or not isinstance(version, Mapping):
        return version
    out: dict[Any, Any] = {}
    for key, value in version.items():
        out[key] = removal_patch(current.get(key), value) if key in current else value
    for key in current:
        if key not in version and current[key] is not None:
            out[key] = None
    return out


def restored_by_defaults(defaults: Any, version: Any, path: Path = ()) -> list[str]:
    """The keys (as paths people read) the code defaults declare and the version does not: the
    runtime's merge would bring them back whatever the props say."""
    if not isinstance(defaults, Mapping):
        return []
    if not isinstance(version, Mapping):
        return [] if version is not None else [format_path(path)] if path else []
    out: list[str] = []
    for key, value in defaults.items():
        if value is None:
            continue
        if key not in version or version[key] is None:
            out.append(format_path((*path, key)))
        elif isinstance(value, Mapping):
            out.extend(restored_by_defaults(value, version[key], (*path, key)))
    return out


def nest(path: Path, value: Any) -> dict[str, Any]:
    """``value`` placed at ``path`` in an otherwise empty mapping."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return dict(out)


@dataclass(frozen=True)
class Target:
    """One KDCube bundle's props as read through the admin API."""

    props: Mapping[str, Any]
    defaults: Mapping[str, Any]

    @property
    def path(self) -> Path:
        """Where the owned subtree lies in these props."""
        return owned_path(self.props) if self.props else AS_CONSUMER

    @property
    def stored(self) -> Any:
        """The owned subtree of the stored props (``None``: none yet)."""
        return owned_subtree(self.props) if self.props else None

    @property
    def effective(self) -> Any:
        """The owned subtree the runtime loads (defaults ← props)."""
        return effective_subtree(self.defaults, self.props)

    def subtree_of_defaults(self) -> Any:
        node: Any = self.defaults
        for key in self.path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node


class PushRefused(Exception):
    """A push that cannot make the runtime load exactly the version; nothing was written."""


def push_patch(target: Target, policy: Mapping[str, Any]) -> dict[str, Any]:
    """The ``op: merge`` props body that makes the runtime load the version's owned subtree.

    Refused (:class:`PushRefused`, naming the keys) when the code defaults declare keys the
    version lacks: no props can remove them.
    """
    version = version_subtree(policy)
    if not isinstance(version, Mapping):
        raise PushRefused("The version has no surfaces.as_consumer to push.")
    if target.path != owned_path(policy):
        raise PushRefused(
            f"KDCube's props hold the policy at {'.'.join(map(str, target.path))} and the version"
            f" at {'.'.join(map(str, owned_path(policy)))}: one merge cannot move it. Move the"
            " bundle's policy in KDCube first (or import it, which keeps its shape)."
        )
    unset = [format_path(p) for p in _marker_paths(version)]
    if unset:
        raise PushRefused(
            "A secret was not imported at "
            + ", ".join(unset)
            + ": put its reference there (env:NAME or file:PATH) before pushing."
        )
    restored = restored_by_defaults(target.subtree_of_defaults(), version)
    if restored:
        raise PushRefused(
            "The bundle's code defaults declare "
            + ", ".join(restored)
            + ": no props can remove them (KDCube merges the defaults under the props)."
            " Add them to the version, or remove them from the bundle's code."
        )
    return nest(target.path, removal_patch(target.stored, version))


def _marker_paths(node: Any, path: Path = ()) -> list[Path]:
    if node == SECRET:
        return [path]
    out: list[Path] = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            out.extend(_marker_paths(value, (*path, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(_marker_paths(value, (*path, index)))
    return out


def differs(target: Target, policy: Mapping[str, Any]) -> list[str]:
    """Where the runtime's view of the owned subtree differs from the version's (top-level
    agents and keys, as paths people read); secrets masked on both sides."""
    version = version_subtree(policy)
    secrets = secret_paths(version)
    loaded = comparable(target.effective, secrets)
    wanted = comparable(version, secrets)
    if loaded == wanted:
        return []
    out: list[str] = []
    loaded_map = loaded if isinstance(loaded, Mapping) else {}
    wanted_map = wanted if isinstance(wanted, Mapping) else {}
    for key in sorted({*loaded_map, *wanted_map}, key=str):
        if key == "agents":
            la = loaded_map.get(key) or {}
            wa = wanted_map.get(key) or {}
            for agent in sorted({*la, *wa}, key=str):
                if la.get(agent) != wa.get(agent):
                    out.append(format_path((*target.path, "agents", agent)))
        elif loaded_map.get(key) != wanted_map.get(key):
            out.append(format_path((*target.path, key)))
    return out or [format_path(target.path)]
