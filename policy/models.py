"""The draft policy (one per Traitdeck instance) and the per-agent manifests."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models


class OrderedJSONField(models.TextField):  # type: ignore[type-arg]
    """JSON kept as its own text. A manifest's key order is meaning — it lists tools in the
    order the server or module gave them, and ``*`` offers them in that order — but
    PostgreSQL's ``jsonb`` (Django's JSONField there) reorders an object's keys and respells
    numbers (``1e46`` comes back as a 47-digit integer). Stored as text, a value reads back as
    it was written on every database."""

    # What django-stubs reads for a custom field's Python types (any JSON value).
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def get_prep_value(self, value: Any) -> Any:
        if value is None:
            return None
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
    data = OrderedJSONField()
    uploaded_at = models.DateTimeField(auto_now=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"manifest of {self.agent}"


class PolicyVersion(models.Model):
    """A published policy: immutable once created (a rollback publishes a new version).

    ``body`` is the export body (what ``sha256`` hashes: the whole-policy export header's hash);
    ``agent_hashes`` maps each agent to the hash of its runtime file (``config.yaml``), which a
    runtime reports as ``policy_hash`` — that is how a round links to the version it ran under.
    """

    number = models.PositiveIntegerField(unique=True)
    body = models.TextField()
    sha256 = models.CharField(max_length=64)
    agent_hashes = models.JSONField(default=dict)
    message = models.TextField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    draft_revision = models.PositiveBigIntegerField(default=0)
    rollback_of = models.PositiveIntegerField(null=True, blank=True)
    #: Agent → the manifest in force when this version was published, so impact and drift
    #: predict a version with the tools it was published with. ``None``: published before
    #: versions kept manifests (readers then fall back to the agent's current manifest).
    manifests = OrderedJSONField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"version {self.number}"


class SuiteCase(models.Model):
    """One case of an agent's regression suite (issue 13): a round and, per action, what it must
    get (``policy.domain.suites``). The suite is every case of the agent; the draft is checked
    against it on every change and publishing with a failing case needs an override."""

    agent = models.CharField(max_length=100)
    name = models.CharField(max_length=200)
    round = models.JSONField()
    expect = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["agent", "created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["agent", "name"], name="suite_case_name")]

    def __str__(self) -> str:
        return f"{self.agent}: {self.name}"


class McpServerSetting(models.Model):
    """What the operator set for one MCP server id, kept outside the exported policy: where
    Traitdeck may list it when the policy holds no config it can read (a deployment's
    environment), and whether its annotations are trusted (contradictions become diagnostics).

    Keyed by server id, which does not shift when connections move."""

    server_id = models.CharField(max_length=200, unique=True)
    #: A URL (streamable HTTP unless ``transport`` says ``sse``) …
    source_url = models.CharField(max_length=2000, blank=True, default="")
    transport = models.CharField(max_length=32, blank=True, default="")
    #: … or an argv list, started only when it is on ``TRAITDECK_MCP_STDIO_COMMANDS`` exactly.
    source_command = models.JSONField(null=True, blank=True)
    trusted = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"mcp server {self.server_id}"
