"""The KDCube app listens to the policy app (``policy.signals``): a published version is pushed
to the configured bundle once committed; an applied import that a KDCube preview carried takes
the bundle's read in as the push guard's baseline."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import receiver

from kdcube.services import carried_read, kdcube_configured, kdcube_push, kdcube_take_in
from policy.models import PolicyVersion
from policy.signals import draft_imported, policy_published


@receiver(policy_published, dispatch_uid="kdcube-push-published")
def push_published(sender: Any, version: PolicyVersion, actor: Any, **kwargs: Any) -> None:
    if kdcube_configured():
        number = version.number
        transaction.on_commit(lambda: kdcube_push(actor=actor, number=number))


@receiver(draft_imported, dispatch_uid="kdcube-take-in-import")
def take_in_import(sender: Any, carried: str, text: str, **kwargs: Any) -> None:
    read = carried_read(carried, text)
    if read is not None:
        kdcube_take_in(read)
