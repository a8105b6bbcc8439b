"""A tool edit reads the draft's YAML once: the service's read-back check is the reading every
page after it (the agent page, its diagnostics) uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

import policy.domain.yaml_io as yaml_io
from policy.selectors import draft_analysis, draft_state
from policy.services import draft_change
from tests.markup import find

pytestmark = pytest.mark.django_db
SEARCH = "/policy/agents/main/connections/0/tools/search/"


def test_it_parses_the_draft_once_per_tool_edit(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = yaml.safe_load(Path("policy/sample/sample-policy.yaml").read_text())
    draft_change(edit=lambda _old: doc, base_revision=None)
    draft_analysis()  # the editor page has shown the current draft
    parses: list[int] = []
    real = yaml_io._load_yaml

    def counted(*args: Any, **kwargs: Any) -> Any:
        parses.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(yaml_io, "_load_yaml", counted)
    response = admin_client.post(
        SEARCH,
        {"base_revision": draft_state().revision, "strategy": ["exploitation", "exploration"]},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert find(response.content.decode(), "tr", data_tool="workspace_jobs.search")
    assert len(parses) == 1
