"""Fixtures of the KDCube app's tests: KDCube's admin routes as recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kdcube import kdcube_replay
from tests.kdcube.kdcube_replay import ReplayServer


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    """KDCube's admin routes as recorded (``tests/kdcube/kdcube_replay.py``), with Traitdeck's
    target settings pointing at them."""
    for srv in kdcube_replay.serve():
        monkeypatch.setenv("TRAITDECK_KDCUBE_URL", srv.url)
        monkeypatch.setenv("TRAITDECK_KDCUBE_TENANT", "acme")
        monkeypatch.setenv("TRAITDECK_KDCUBE_PROJECT", "demo")
        monkeypatch.setenv("TRAITDECK_KDCUBE_BUNDLE", "workspace@2026-03-31-13-36")
        monkeypatch.setenv("TRAITDECK_KDCUBE_TOKEN", "td-rec-super-admin")
        # A generous limit (the server runs on a thread of this busy process); the slow case
        # sets its own.
        monkeypatch.setenv("TRAITDECK_KDCUBE_TIMEOUT_S", "30")
        yield srv
