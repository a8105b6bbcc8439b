"""Recording audit entries: every service that changes something calls ``audit_record``."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from audit.models import AuditEntry

CLI_ACTOR = "cli"


def actor_label(actor: Any) -> str:
    """How an actor is shown: a user's username, a given name (``cli``, ``token:x``), or
    ``system`` when nobody is known."""
    if isinstance(actor, AbstractBaseUser) and not isinstance(actor, AnonymousUser):
        return str(actor.get_username())
    if isinstance(actor, str) and actor.strip():
        return actor.strip()
    return "system"


def add_actor_argument(parser: ArgumentParser) -> None:
    """``--actor NAME`` for a management command that changes something."""
    parser.add_argument(
        "--actor",
        default=None,
        help=f"who is running this, for the audit log (default: {CLI_ACTOR!r})",
    )


def cli_actor(name: str | None) -> Any:
    """The actor a management command records: the user named by ``--actor`` when one has that
    username (so filtering the log by that user finds it), else the name as given, else
    ``cli``."""
    name = (name or "").strip()
    if not name:
        return CLI_ACTOR
    user = get_user_model().objects.filter(username=name).first()
    return user if user is not None else name


def audit_record(
    *,
    actor: Any,
    action: str,
    target: str = "",
    message: str = "",
    before: Any = None,
    after: Any = None,
    ref: dict[str, Any] | None = None,
) -> AuditEntry:
    """Add one entry. ``actor`` is a user, or a plain name (``cli``, ``token:demo``).
    ``ref`` locates the thing for a link (see ``AuditEntry.ref``).

    Call it inside the service's transaction, so a change and its entry commit together."""
    # Any: the model's FK is typed for the concrete user model, the check for any user.
    user: Any = actor if isinstance(actor, AbstractBaseUser) and actor.is_authenticated else None
    return AuditEntry.objects.create(
        actor=user,
        actor_name=actor_label(actor)[:150],
        action=action[:64],
        target=target[:300],
        message=message,
        before=before,
        after=after,
        ref=ref or {},
    )
