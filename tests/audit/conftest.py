from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEntry
from tests.policy.conftest import seed_agents


def seed(**agents: Any) -> int:
    """Make the draft hold these agents (and forget the entry that records it)."""
    revision = seed_agents(**agents)
    AuditEntry.objects.all().delete()
    return revision


def only_entry() -> AuditEntry:
    """The one entry a change recorded (a change records exactly one)."""
    entries = list(AuditEntry.objects.all())
    assert len(entries) == 1, [str(e) for e in entries]
    return entries[0]


JOBS = {
    "kind": "python",
    "ref": "tools/jobs.py",
    "alias": "jobs",
    "allowed": ["search", "launch"],
    "tool_traits": {"search": {"strategy": ["exploration"]}},
}


@pytest.fixture
def seeded(db: None) -> int:
    return seed(main={"tools": [dict(JOBS)]})
