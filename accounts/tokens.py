"""Runtime token services: create, rotate, revoke, authenticate (writes and checks in one place)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from accounts.models import RuntimeToken, Scope
from audit.services import audit_record

TOKEN_PREFIX = "tdk"
#: Recording every use would turn each ingest POST into an extra write; a minute is precise enough.
LAST_USED_RESOLUTION = timedelta(seconds=60)

TOKEN_CREATE = "token.create"
TOKEN_ROTATE = "token.rotate"
TOKEN_REVOKE = "token.revoke"


class TokenExists(Exception):
    """A token with that name already exists (use rotate to replace it)."""


class TokenNotFound(Exception):
    """No token has that name."""


@dataclass(frozen=True)
class IssuedToken:
    token: RuntimeToken
    secret: str


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _validate_scopes(scopes: Iterable[str]) -> list[str]:
    known = set(Scope.values)
    unique = list(dict.fromkeys(scopes))
    unknown = [s for s in unique if s not in known]
    if unknown:
        raise ValueError(f"unknown scope {unknown[0]!r}; known scopes: {', '.join(Scope.values)}")
    return unique


def _audit_view(token: RuntimeToken | None) -> dict[str, Any] | None:
    """A token as the audit log shows it (never its secret or hash)."""
    if token is None:
        return None
    return {
        "name": token.name,
        "scopes": list(token.scopes),
        "revoked": token.revoked_at.isoformat() if token.revoked_at else None,
    }


@transaction.atomic
def runtime_token_create(
    *, name: str, scopes: Iterable[str], rotate: bool = False, actor: Any = None
) -> IssuedToken:
    """Create a token (or, with ``rotate``, replace the one of that name) and return its secret.

    ``actor`` (a user, or ``cli``/a name) is recorded in the audit log."""
    scope_list = _validate_scopes(scopes)
    replaced = RuntimeToken.objects.filter(name=name).first()
    if replaced is not None and not rotate:
        raise TokenExists(name)
    if replaced is not None:
        replaced.delete()
    key_id = secrets.token_hex(6)
    secret = f"{TOKEN_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    try:
        token = RuntimeToken.objects.create(
            name=name, key_id=key_id, secret_hash=_hash(secret), scopes=scope_list
        )
    except IntegrityError as exc:  # a concurrent create of the same name
        raise TokenExists(name) from exc
    audit_record(
        actor=actor,
        action=TOKEN_ROTATE if replaced is not None else TOKEN_CREATE,
        target=f"token {name}",
        before=_audit_view(replaced),
        after=_audit_view(token),
        ref={"token": name},
    )
    return IssuedToken(token=token, secret=secret)


@transaction.atomic
def runtime_token_revoke(*, name: str, actor: Any = None) -> RuntimeToken:
    """Revoke the token of that name (it stops working at once); revoking a revoked token
    changes nothing and records nothing."""
    token = RuntimeToken.objects.select_for_update().filter(name=name).first()
    if token is None:
        raise TokenNotFound(name)
    if token.revoked_at is None:
        before = _audit_view(token)
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(
            actor=actor,
            action=TOKEN_REVOKE,
            target=f"token {name}",
            before=before,
            after=_audit_view(token),
            ref={"token": name},
        )
    return token


def _active_token(key_id: str) -> RuntimeToken | None:
    """The unrevoked token with this key id (unique), read with plain SQL: every ingest POST
    asks, and building the queryset cost five times the query."""
    table = RuntimeToken._meta.db_table
    quote = connection.ops.quote_name
    columns = ", ".join(quote(str(f.column)) for f in RuntimeToken._meta.concrete_fields)
    rows = RuntimeToken.objects.raw(
        f"SELECT {columns} FROM {quote(table)}"
        f" WHERE {quote('key_id')} = %s AND {quote('revoked_at')} IS NULL",
        [key_id],
    )
    return next(iter(rows), None)


def runtime_token_authenticate(secret: str) -> RuntimeToken | None:
    """The active token whose secret this is, or ``None``. Records when it was last used."""
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    token = _active_token(parts[1])
    if token is None or not hmac.compare_digest(token.secret_hash, _hash(secret)):
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        try:
            with transaction.atomic():
                RuntimeToken.objects.filter(pk=token.pk).update(last_used_at=now)
        except OperationalError:
            # Best effort: a busy store (another writer's lock) must not turn authentication
            # into a 500; the request's own write then answers 503 with Retry-After.
            return token
        token.last_used_at = now
    return token
