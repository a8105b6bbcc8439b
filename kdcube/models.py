"""What Traitdeck keeps of its KDCube target: each push, the last read of the bundle's props, and
per bundle the push guard's baseline. The tables were made by the policy app and keep its names
(``policy_kdcube*``)."""

from __future__ import annotations

from django.db import models


class KDCubePush(models.Model):
    """One attempt to write a version into the configured KDCube bundle's props.

    ``status``: ``pushed`` (written, read back, and the runtime's view equals the version),
    ``failed`` (KDCube's answer, or what differs after writing, in ``answer``) or ``refused``
    (Traitdeck did not write: the subtree changed since the last read, never read, or a key the
    code defaults would restore). The version itself is never touched by a push.
    """

    version = models.PositiveIntegerField(db_index=True)
    target = models.CharField(max_length=300)
    status = models.CharField(max_length=16)
    answer = models.TextField(blank=True)
    subtree_hash = models.CharField(max_length=64, blank=True)
    actor_name = models.CharField(max_length=150)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "policy_kdcubepush"  # made by the policy app; kept when the model moved
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"push of version {self.version}: {self.status}"


class KDCubeRead(models.Model):
    """What Traitdeck last saw of the KDCube bundle's owned subtree (hashes only: what KDCube
    returns has secrets resolved, so no value is kept). ``differs`` lists where the runtime's
    view differs from ``version`` (the version in force when read)."""

    target = models.CharField(max_length=300)
    source = models.CharField(max_length=16)
    stored_hash = models.CharField(max_length=64)
    version = models.PositiveIntegerField(null=True, blank=True)
    differs = models.JSONField(default=list)
    updated_by = models.CharField(max_length=150, blank=True)
    #: How the owned subtree differs from the guard's baseline, named down to the trait
    #: (``[{path, before, after, text}]``; values only where the allow-list shows them).
    changes = models.JSONField(default=list)
    #: Keys of the read props the runtime never reads (``key-inert``), as key paths.
    inert = models.JSONField(default=list)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "policy_kdcuberead"  # made by the policy app; kept when the model moved
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"read of {self.target} ({self.source})"


class KDCubeBundle(models.Model):
    """Per KDCube target (bundle): the push guard's baseline and what serializes its work.

    The **baseline** is the owned subtree of KDCube's stored props as read back after
    Traitdeck's last push that wrote, or as read by an import that was applied: its keyed hash
    and a redacted copy (``kdcube.domain.drift.redacted``: allow-listed values in plain
    text, any other value a keyed digest). Reads by the bridge, the poll, previews and dry runs
    never move it. ``push_until`` leases the bundle to one push at a time; ``read_at`` and
    ``read_pending_until`` coalesce the bridge's reads (at most one per few seconds).
    """

    target = models.CharField(max_length=300, unique=True)
    baseline_hash = models.CharField(max_length=64, blank=True)
    #: ``None``: only the hash is known (a baseline kept from before the redacted copy existed).
    baseline = models.JSONField(null=True, blank=True)
    #: ``push`` (read back after a push) or ``import`` (an applied import's read).
    baseline_source = models.CharField(max_length=16, blank=True)
    baseline_version = models.PositiveIntegerField(null=True, blank=True)
    baseline_at = models.DateTimeField(null=True, blank=True)
    push_until = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    read_pending_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "policy_kdcubebundle"  # made by the policy app; kept when the model moved

    def __str__(self) -> str:
        return f"KDCube bundle {self.target}"
