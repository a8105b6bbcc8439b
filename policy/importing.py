"""What an import would do, before it does it: the API import and the import page share this.

An import is preview-first (DESIGN §3): the diagnostics of the text and a unified diff of the
exports (the current draft against the imported policy). Applying goes through
``services.draft_replace``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from policy.caps import web_caps
from policy.domain.analysis import Analysis
from policy.domain.caps import refuse_over_caps
from policy.domain.yaml_io import WEB_MAX_BYTES, export_text
from policy.selectors import DraftState, draft_state, text_analysis

#: Codes that make a refusal a "too large" one (HTTP 413 rather than 422).
TOO_LARGE = "yaml-too-large"


@dataclass(frozen=True)
class ImportPreview:
    """The text's analysis, the draft it was compared with, and (unless refused) the diff."""

    analysis: Analysis
    draft: DraftState
    new_text: str | None

    @property
    def refused(self) -> bool:
        return self.analysis.refused

    @property
    def too_large(self) -> bool:
        return any(d.code == TOO_LARGE for d in self.analysis.diagnostics)

    @property
    def data(self) -> Any:
        return self.analysis.data

    @property
    def bundle(self) -> str | None:
        """The bundle read when the text was a KDCube bundles descriptor."""
        return self.analysis.bundle.bundle_id if self.analysis.bundle else None

    @property
    def diff(self) -> str:
        """The unified diff of the two exports (empty when refused or when nothing changes)."""
        if self.new_text is None:
            return ""
        return import_diff(self.draft, self.new_text)


def import_diff(draft: DraftState, new_text: str) -> str:
    return "".join(
        difflib.unified_diff(
            draft.text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"draft (revision {draft.revision})",
            tofile="import",
        )
    )


def import_preview(
    text: str | bytes,
    *,
    max_bytes: int = WEB_MAX_BYTES,
    uncapped: bool = False,
    bundle: str | None = None,
) -> ImportPreview:
    """Analyse ``text`` as an import into the current draft; changes nothing. Over one of the
    web's caps it is refused (``policy-too-large``) unless ``uncapped`` (management commands).
    A KDCube bundles descriptor imports the props of ``bundle`` (or of its only bundle with a
    policy); raises ``DescriptorError`` when no bundle can be chosen."""
    analysis = text_analysis(text, max_bytes=max_bytes, bundle=bundle)
    draft = draft_state()
    if not uncapped:
        analysis = refuse_over_caps(analysis, web_caps(), before=draft.data)
    new_text = None if analysis.refused else export_text(analysis.data)
    return ImportPreview(analysis=analysis, draft=draft, new_text=new_text)
