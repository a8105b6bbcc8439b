"""Runtime token services: create, rotate, revoke, authenticate (writes and checks in one place)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import RuntimeToken, Scope

TOKEN_PREFIX = "tdk"
#: Recording every use would turn each ingest POST into an extra write; a minute is precise enough.
LAST_USED_RESOLUTION = timedelta(seconds=60)


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


@transaction.atomic
def runtime_token_create(*, name: str, scopes: Iterable[str], rotate: bool = False) -> IssuedToken:
    """Create a token (or, with ``rotate``, replace the one of that name) and return its secret."""
    scope_list = _validate_scopes(scopes)
    if rotate:
        RuntimeToken.objects.filter(name=name).delete()
    elif RuntimeToken.objects.filter(name=name).exists():
        raise TokenExists(name)
    key_id = secrets.token_hex(6)
    secret = f"{TOKEN_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    try:
        token = RuntimeToken.objects.create(
            name=name, key_id=key_id, secret_hash=_hash(secret), scopes=scope_list
        )
    except IntegrityError as exc:  # a concurrent create of the same name
        raise TokenExists(name) from exc
    return IssuedToken(token=token, secret=secret)


def runtime_token_revoke(*, name: str) -> RuntimeToken:
    token = RuntimeToken.objects.filter(name=name).first()
    if token is None:
        raise TokenNotFound(name)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def runtime_token_authenticate(secret: str) -> RuntimeToken | None:
    """The active token whose secret this is, or ``None``. Records when it was last used."""
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    token = RuntimeToken.objects.filter(key_id=parts[1], revoked_at__isnull=True).first()
    if token is None or not hmac.compare_digest(token.secret_hash, _hash(secret)):
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        RuntimeToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
