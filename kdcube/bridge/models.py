"""What a running bridge last reported (one row per bridge name): the overview shows it."""

from __future__ import annotations

from django.db import models


class BridgeStatus(models.Model):
    name = models.CharField(max_length=100, unique=True)
    #: The token the bridge reports with (its name), for the reader of the overview.
    token_name = models.CharField(max_length=100, blank=True, default="")
    reported_at = models.DateTimeField()
    last_envelope_at = models.DateTimeField(null=True, blank=True)
    #: ``{"envelopes", "mapped", "inferred", "skipped", "posted", "reasons": {reason: count}}``
    counts = models.JSONField(default=dict)

    def __str__(self) -> str:
        return self.name
