"""Token changes from the command line are audited as ``cli`` or the ``--actor`` given."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from audit.models import AuditEntry

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("runtime_token", *args, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


def test_it_records_create_rotate_and_revoke_as_cli() -> None:
    first = run("create", "sim", "--scope", "events:write")
    second = run("create", "sim", "--scope", "config:read", "--rotate")
    run("revoke", "sim")
    entries = list(AuditEntry.objects.order_by("id"))
    assert [(e.actor_name, e.action, e.target) for e in entries] == [
        ("cli", "token.create", "token sim"),
        ("cli", "token.rotate", "token sim"),
        ("cli", "token.revoke", "token sim"),
    ]
    assert entries[0].before is None
    assert entries[0].after == {"name": "sim", "scopes": ["events:write"], "revoked": None}
    assert entries[1].before["scopes"] == ["events:write"]
    assert entries[1].after["scopes"] == ["config:read"]
    assert entries[2].after["revoked"] is not None
    # Never a secret in the log.
    text = str([(e.before, e.after, e.message, e.target) for e in entries])
    assert first not in text
    assert second not in text


def test_it_records_the_actor_named_with_actor() -> None:
    run("create", "sim", "--scope", "events:write", "--actor", "maria")
    run("revoke", "sim", "--actor", "maria")
    assert list(AuditEntry.objects.values_list("actor_name", flat=True)) == ["maria", "maria"]


def test_revoking_a_revoked_token_records_nothing_more() -> None:
    run("create", "sim", "--scope", "events:write")
    run("revoke", "sim")
    run("revoke", "sim")
    assert AuditEntry.objects.filter(action="token.revoke").count() == 1
