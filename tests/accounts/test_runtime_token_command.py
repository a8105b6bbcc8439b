from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import RuntimeToken
from accounts.tokens import runtime_token_authenticate

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("runtime_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_only_the_secret_on_create() -> None:
    out, _ = run("create", "sim", "--scope", "events:write", "--scope", "config:read")
    lines = out.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("tdk_")
    token = runtime_token_authenticate(lines[0])
    assert token is not None
    assert token.scopes == ["events:write", "config:read"]


def test_it_stores_only_a_hash_of_the_secret() -> None:
    out, _ = run("create", "sim", "--scope", "events:write")
    secret = out.strip()
    row = RuntimeToken.objects.get(name="sim")
    assert secret not in (row.secret_hash, row.key_id)
    assert secret not in json.dumps(list(RuntimeToken.objects.values()), default=str)


def test_it_refuses_a_duplicate_name_with_exit_1() -> None:
    run("create", "sim", "--scope", "events:write")
    with pytest.raises(CommandError, match="already exists") as exc:
        run("create", "sim", "--scope", "events:write")
    assert exc.value.returncode == 1


def test_it_rotates_an_existing_token() -> None:
    old, _ = run("create", "sim", "--scope", "events:write")
    new, _ = run("create", "sim", "--scope", "events:read", "--rotate")
    assert new.strip() != old.strip()
    assert runtime_token_authenticate(old.strip()) is None
    rotated = runtime_token_authenticate(new.strip())
    assert rotated is not None
    assert rotated.scopes == ["events:read"]


def test_it_revokes_a_token_so_it_stops_working() -> None:
    secret, _ = run("create", "sim", "--scope", "events:write")
    run("revoke", "sim")
    assert runtime_token_authenticate(secret.strip()) is None
    assert RuntimeToken.objects.get(name="sim").revoked_at is not None


def test_it_exits_1_when_revoking_an_unknown_name() -> None:
    with pytest.raises(CommandError, match="no token named 'ghost'") as exc:
        run("revoke", "ghost")
    assert exc.value.returncode == 1


def test_it_lists_tokens_as_json_without_secrets() -> None:
    secret, _ = run("create", "sim", "--scope", "events:write")
    out, _ = run("list", "--format", "json")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["sim"]
    assert set(rows[0]) == {"name", "scopes", "created", "last_used", "revoked"}
    assert rows[0]["last_used"] is None
    assert secret.strip() not in out


def test_it_lists_last_use_after_authentication() -> None:
    secret, _ = run("create", "sim", "--scope", "events:write")
    runtime_token_authenticate(secret.strip())
    out, _ = run("list")
    assert "last_used=never" not in out
    assert out.startswith("sim\tscopes=events:write")
