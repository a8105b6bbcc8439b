"""Bridge heartbeats: store what a bridge reports, read it back for the overview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from core.text import find_nul
from kdcube.bridge.models import BridgeStatus
from policy.versions import agents_in_force

#: Count names a report may carry (anything else is ignored, never stored).
COUNT_NAMES = (
    "envelopes",
    "mapped",
    "inferred",
    "skipped",
    "events",
    "posted",
    "refused",
    "dropped_rounds",
    "dropped_events",
    # Not a count: the events the bridge held when it reported (its buffer's depth).
    "buffered",
)
MAX_REASONS = 20
#: A bridge that has not reported for this long is shown as silent.
SILENT_AFTER = timedelta(seconds=60)


class BadReport(ValueError):
    """A status report that breaks the contract (one plain sentence)."""


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        raise BadReport(f"{name} must be an integer ≥ 0")
    return value


def bridge_report(body: Any, *, token_name: str) -> dict[str, Any]:
    """Store one report; answer with the agents of the policy in force (the bridge maps agent
    ids onto them, as the runtime's config loader falls back to its default agent)."""
    if not isinstance(body, dict):
        raise BadReport("the body must be a JSON object")
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise BadReport("name must be a non-empty string of at most 100 characters")
    last = body.get("last_envelope_ms")
    last_at = None
    if last is not None:
        last_at = datetime.fromtimestamp(_count(last, "last_envelope_ms") / 1000, tz=UTC)
    raw_counts = body.get("counts") or {}
    if not isinstance(raw_counts, dict):
        raise BadReport("counts must be an object")
    counts: dict[str, Any] = {
        key: _count(raw_counts[key], f"counts.{key}") for key in COUNT_NAMES if key in raw_counts
    }
    reasons = raw_counts.get("reasons") or {}
    if not isinstance(reasons, dict):
        raise BadReport("counts.reasons must be an object")
    counts["reasons"] = {
        str(reason)[:200]: _count(n, "counts.reasons")
        for reason, n in list(reasons.items())[:MAX_REASONS]
    }
    # Valid JSON and UTF-8, but no PostgreSQL text or JSON column can hold a NUL (a 500 there,
    # found by the schema test on PostgreSQL).
    if find_nul([name, list(counts["reasons"])]) is not None:
        raise BadReport("name and the reasons of counts.reasons must not contain NUL characters")
    BridgeStatus.objects.update_or_create(
        name=name.strip(),
        defaults={
            "token_name": token_name,
            "reported_at": timezone.now(),
            "last_envelope_at": last_at,
            "counts": counts,
        },
    )
    return {"agents": sorted(agents_in_force())}


def bridge_statuses(now: datetime) -> list[dict[str, Any]]:
    """Every bridge that has reported, newest report first, with ages in whole seconds."""
    out = []
    for row in BridgeStatus.objects.order_by("-reported_at")[:10]:
        envelope_age = (
            max(0, int((now - row.last_envelope_at).total_seconds()))
            if row.last_envelope_at is not None
            else None
        )
        out.append(
            {
                "name": row.name,
                "silent": now - row.reported_at > SILENT_AFTER,
                "report_age": max(0, int((now - row.reported_at).total_seconds())),
                "envelope_age": envelope_age,
                "counts": row.counts,
            }
        )
    return out
