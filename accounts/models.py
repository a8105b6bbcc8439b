"""Runtime tokens: how machines (agent runtimes, the simulator) authenticate to the API."""

from __future__ import annotations

from django.db import models


class Scope(models.TextChoices):
    CONFIG_READ = "config:read", "Read the published policy"
    EVENTS_WRITE = "events:write", "Post round events"
    EVENTS_READ = "events:read", "Read rounds and events"
    METRICS_READ = "metrics:read", "Read the Prometheus metrics"


class RuntimeToken(models.Model):
    """A named bearer token. Only a hash of the secret is stored; the secret is shown once.

    The secret looks like ``tdk_<key_id>_<random>``: ``key_id`` finds the row without comparing
    secrets in the database, then the hash is compared in constant time.
    """

    name = models.CharField(max_length=100, unique=True)
    key_id = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes
