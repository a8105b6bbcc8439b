"""The audit log: who changed what, when, and what it was before."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """One recorded change. Entries are only ever added, never edited or removed.

    ``actor_name`` is what a person reads: the username, ``cli`` (or the ``--actor`` a
    management command was given), or ``token:<name>`` for a runtime. ``action`` is a dotted
    verb (``draft.edit``, ``policy.publish``, ``token.create`` …); ``target`` names the thing
    (``agent main``, ``tool workspace_jobs.search``, ``version 3``, ``token demo``).
    ``before``/``after`` hold the part that changed (``null``: it did not exist).
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, db_index=True)
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=300, blank=True)
    message = models.TextField(blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    #: Where the thing lives, for a link: ``{"agent": …}``, plus ``connection``/``key``/
    #: ``namespace`` for a tool, ``{"version": n}``, ``{"token": name}``; empty when nowhere.
    ref = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.target}"
