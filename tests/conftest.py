from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# deadline=None and no too_slow health check: CI machines are shared and slow, and both are
# clocks (an example's run time; how long generating the first examples took), not properties of
# the code. derandomize keeps CI failures reproducible. A test's own ``suppress_health_check``
# replaces this list: name too_slow there too.
_SHARED_MACHINE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", _SHARED_MACHINE, max_examples=200, derandomize=True)
settings.register_profile("dev", _SHARED_MACHINE, max_examples=200)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _react_v3(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite tests the v3 agent's pipeline (overseer, early start, ledger) unless a test says
    otherwise: the CLI reads this variable, the web ``config.settings_test``'s same pin. Tests of
    KDCube's default v2 take it away or set their own."""
    monkeypatch.setenv("TRAITDECK_REACT_AGENT_VERSION", "v3")


# --- logged-in clients per role (DESIGN §6). pytest-django's ``admin_client`` is a superuser. ---
# Imports stay inside the fixtures: the browser group loads this file without pytest-django.


def make_user(username: str, role: str | None, *, password: str = "pw-role-123") -> Any:
    """A user with ``role`` (viewer, editor, publisher, ``"superuser"`` or ``None``)."""
    from django.contrib.auth import get_user_model

    from accounts.roles import role_set

    model = get_user_model()
    if role == "superuser":
        return model.objects.create_superuser(username, password=password)
    user = model.objects.create_user(username, password=password)
    role_set(user, role)
    return user


def _client_as(role: str | None) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(make_user(f"as-{role or 'none'}", role))
    return client


@pytest.fixture
def no_role_client(db: None) -> Any:
    return _client_as(None)


@pytest.fixture
def viewer_client(db: None) -> Any:
    return _client_as("viewer")


@pytest.fixture
def editor_client(db: None) -> Any:
    return _client_as("editor")


@pytest.fixture
def publisher_client(db: None) -> Any:
    return _client_as("publisher")
