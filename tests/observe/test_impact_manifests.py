"""Impact and drift compare like with like: a version is predicted with the manifests it was
published with, the draft with the current ones."""

from __future__ import annotations

from typing import Any

import pytest

from observe.drift import _version_policy
from observe.recorded_impact import _resolver, policy_side
from policy.services import draft_change, manifest_upload
from policy.versions import policy_publish

pytestmark = pytest.mark.django_db

DOC: dict[str, Any] = {
    "surfaces": {
        "as_consumer": {
            "agents": {"main": {"tools": [{"kind": "python", "alias": "jobs", "module": "m"}]}}
        }
    }
}


def strategy(ref: str) -> list[str]:
    resolution = _resolver(policy_side(ref))("main")
    assert resolution is not None
    tool = resolution.find("jobs.search")
    assert tool is not None
    return list(tool.strategy)


def test_a_version_is_predicted_with_the_manifest_it_was_published_with() -> None:
    draft_change(edit=lambda _old: DOC, base_revision=None)
    manifest_upload(
        agent="main", data={"jobs.search": {"tool_traits": {"strategy": ["exploration"]}}}
    )
    version = policy_publish(actor="cli", message="v1", confirm_warnings=True)
    manifest_upload(
        agent="main", data={"jobs.search": {"tool_traits": {"strategy": ["exploitation"]}}}
    )
    assert strategy(str(version.number)) == ["exploration"]
    assert strategy("draft") == ["exploitation"]
    # The cache is per process and keyed by version number: numbers repeat across tests.
    _version_policy.cache_clear()
    try:
        policy, _mode = _version_policy(version.number, "main")  # what drift predicts with
        assert policy.traits("jobs.search")["strategy"] == ["exploration"]
    finally:
        _version_policy.cache_clear()
