"""One entry point for "what does Traitdeck say about this policy text": load, then validate.

The CLI, the web import, the editor and the API all go through here, so they agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.document.diagnostics import Diagnostic, has_errors, sort_for_display, summarize
from engine.document.source import SourceMap
from engine.tools.manifest import Manifest
from policy.domain.descriptors import BundleItem, read_policy_text
from policy.domain.validation.discovered import ServerFacts
from policy.domain.validation.validate import validate_policy
from policy.domain.yaml_io import MAX_NODES, WEB_MAX_BYTES, LoadedPolicy


@dataclass(frozen=True)
class Analysis:
    """A policy text as Traitdeck understands it: the document (unless refused) and findings."""

    loaded: LoadedPolicy
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: The bundle read when the text was a KDCube bundles descriptor, and the ids of its
    #: bundles that carry a policy.
    bundle: BundleItem | None = None
    policy_bundles: tuple[str, ...] = ()

    @property
    def refused(self) -> bool:
        """The text cannot become a policy at all (DESIGN §6 "Imports")."""
        return self.loaded.refused

    @property
    def data(self) -> Any:
        return self.loaded.data

    @property
    def source(self) -> SourceMap:
        return self.loaded.source

    @property
    def has_errors(self) -> bool:
        return has_errors(self.diagnostics)

    def summary(self) -> dict[str, int]:
        return summarize(self.diagnostics)

    def report(self) -> dict[str, Any]:
        """``{"diagnostics": [...], "summary": {...}}``: the validate JSON of CLI and API."""
        return {
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "summary": self.summary(),
        }


def analyze_text(
    text: str | bytes,
    *,
    manifest: Manifest | None = None,
    manifests: Mapping[str, Manifest] | None = None,
    servers: ServerFacts | None = None,
    max_bytes: int = WEB_MAX_BYTES,
    max_nodes: int = MAX_NODES,
    bundle: str | None = None,
) -> Analysis:
    """Load ``text`` — bundle props, or a KDCube bundles descriptor whose bundle ``bundle`` (or
    its only bundle with a policy) is read — and, unless it is refused, validate the policy it
    holds (``manifest`` for every agent, ``manifests`` per agent name). Raises
    ``DescriptorError`` when a descriptor's bundle cannot be chosen."""
    read = read_policy_text(text, bundle=bundle, max_bytes=max_bytes, max_nodes=max_nodes)
    return analyze_loaded(
        read.loaded,
        manifest=manifest,
        manifests=manifests,
        servers=servers,
        bundle=read.bundle,
        policy_bundles=read.policy_ids,
    )


def analyze_loaded(
    loaded: LoadedPolicy,
    *,
    manifest: Manifest | None = None,
    manifests: Mapping[str, Manifest] | None = None,
    servers: ServerFacts | None = None,
    bundle: BundleItem | None = None,
    policy_bundles: tuple[str, ...] = (),
) -> Analysis:
    """:func:`analyze_text` of text already loaded (the draft's, read once when it was saved)."""
    diagnostics = list(loaded.diagnostics)
    if not loaded.refused:
        diagnostics += validate_policy(
            loaded.data,
            loaded.source,
            manifest,
            manifests=manifests,
            servers=servers,
        )
    return Analysis(
        loaded=loaded,
        diagnostics=sort_for_display(diagnostics),
        bundle=bundle,
        policy_bundles=policy_bundles,
    )
