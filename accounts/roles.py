"""Roles (DESIGN §6): Django groups ``viewer`` < ``editor`` < ``publisher``; superusers have all.

A user's role is the highest of the three groups they belong to; each role includes the rights
of the ones before it, so a publisher needs no viewer group as well.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q

from accounts.access import ANY_USER, PUBLIC, PUBLISHER, ROLES, SUPERUSER

#: What ``user_role`` answers for a superuser (above every group).
SUPERUSER_ROLE = SUPERUSER


def user_role(user: Any) -> str | None:
    """The user's role: ``"superuser"``, the highest role group they are in, or ``None``."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return SUPERUSER_ROLE
    if hasattr(user, "_traitdeck_role"):
        cached: str | None = user._traitdeck_role
        return cached
    role = group_role(user)
    # One request asks several times (middleware, templates): one query is enough.
    user._traitdeck_role = role
    return role


def group_role(user: Any) -> str | None:
    """The highest role group ``user`` is in (superuser or not), or ``None``."""
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    return next((r for r in reversed(ROLES) if r in names), None)


def role_rank(role: str | None) -> int:
    """0 for no role, then 1 viewer … 3 publisher, 4 superuser."""
    if role == SUPERUSER_ROLE:
        return len(ROLES) + 1
    return ROLES.index(role) + 1 if role in ROLES else 0


def has_role(user: Any, role: str) -> bool:
    """Whether ``user`` may act as ``role`` (a role of the table: also ``public``, ``any-user``)."""
    if role == PUBLIC:
        return True
    if role == ANY_USER:
        return bool(user is not None and getattr(user, "is_authenticated", False))
    return role_rank(user_role(user)) >= role_rank(role) > 0


def role_set(user: Any, role: str | None) -> None:
    """Give ``user`` exactly ``role`` (``None``: no role). Groups are made when missing."""
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if role is not None:
        group, _ = Group.objects.get_or_create(name=role)
        user.groups.add(group)
    user.__dict__.pop("_traitdeck_role", None)


def role_granters() -> list[str]:
    """Usernames of whoever can give roles (publishers and superusers), for the "ask" page."""
    users = get_user_model().objects.filter(
        Q(is_superuser=True) | Q(groups__name=PUBLISHER), is_active=True
    )
    return sorted(set(users.values_list("username", flat=True)))
