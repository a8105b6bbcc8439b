"""The draft policy (one per Traitdeck instance) and the per-agent manifests."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PolicyDraft(models.Model):
    """The policy being edited, stored as its canonical YAML export body.

    Storing the document as YAML (not JSON) keeps every key and value the runtime's format can
    hold (unknown keys, dates, non-string keys), and the diagnostics' line numbers then match
    the file the admin exports. ``revision`` grows with every change (optimistic concurrency).
    """

    SINGLETON_ID = 1

    body = models.TextField()
    revision = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"draft r{self.revision}"


class AgentManifest(models.Model):
    """What the runtime discovered in code for one agent: ``{"<tool id>": {"tool_traits": …}}``."""

    agent = models.CharField(max_length=100, unique=True)
    data = models.JSONField()
    uploaded_at = models.DateTimeField(auto_now=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"manifest of {self.agent}"
