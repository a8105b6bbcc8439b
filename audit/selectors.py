"""Reading the audit log: one filter (user, action, since/until) shared by the page, the CSV
export and the JSON API, so the three always list the same entries."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from audit.models import AuditEntry
from core.timewindow import TimeWindowError, parse_moment

#: The fields a filter reads, as the page's form, the CSV link and the API name them.
FILTER_FIELDS = ("user", "action", "since", "until")
CSV_COLUMNS = ("at", "actor", "action", "target", "message", "before", "after")


@dataclass(frozen=True)
class AuditFilter:
    """``user``: the actor's name, exactly (``cli`` for commands run without ``--actor``);
    ``action``: any part of the action's name, any case (``publish`` finds ``policy.publish``,
    ``token.`` every token action)."""

    user: str = ""
    action: str = ""
    since: datetime | None = None
    until: datetime | None = None

    def apply(self, entries: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        if self.user:
            entries = entries.filter(actor_name=self.user)
        if self.action:
            entries = entries.filter(action__icontains=self.action)
        if self.since is not None:
            entries = entries.filter(at__gte=self.since)
        if self.until is not None:
            entries = entries.filter(at__lt=self.until)
        return entries


@dataclass(frozen=True)
class ParsedFilter:
    audit_filter: AuditFilter
    #: One plain sentence per value that could not be read (that value is then ignored).
    errors: tuple[str, ...]
    #: The values as given, for the form and for links that keep the filter.
    raw: dict[str, str]


def parse_filter(params: Mapping[str, Any], *, now: datetime) -> ParsedFilter:
    """Read the filter from query parameters (a ``QueryDict`` or a plain mapping)."""
    raw = {name: str(params.get(name) or "").strip()[:200] for name in FILTER_FIELDS}
    errors: list[str] = []
    moments: dict[str, datetime | None] = {}
    for name in ("since", "until"):
        try:
            moments[name] = parse_moment(name, raw[name], now=now)
        except TimeWindowError as exc:
            errors.append(str(exc))
            moments[name] = None
    audit_filter = AuditFilter(
        user=raw["user"], action=raw["action"], since=moments["since"], until=moments["until"]
    )
    return ParsedFilter(audit_filter, tuple(errors), raw)


def audit_entries(audit_filter: AuditFilter) -> QuerySet[AuditEntry]:
    """Entries matching the filter, newest first."""
    return audit_filter.apply(AuditEntry.objects.all()).order_by("-at", "-id")


def audit_actor_names() -> list[str]:
    """Everyone who has an entry (the page's user filter offers them)."""
    names = AuditEntry.objects.order_by("actor_name").values_list("actor_name", flat=True)
    return list(names.distinct())


def audit_actions() -> list[str]:
    names = AuditEntry.objects.order_by("action").values_list("action", flat=True)
    return list(names.distinct())


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    """One entry as the API and the CSV give it."""
    return {
        "id": entry.pk,
        "at": entry.at.isoformat(),
        "actor": entry.actor_name,
        "action": entry.action,
        "target": entry.target,
        "message": entry.message,
        "before": entry.before,
        "after": entry.after,
        "ref": entry.ref or {},
    }


def _json_cell(value: Any) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _csv_safe(text: str) -> str:
    # A cell starting with = + - @ (or a tab/CR) is a formula to a spreadsheet: a name or a
    # message written by a user must stay text when someone opens the export.
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_lines(entries: Iterable[AuditEntry]) -> Iterator[str]:
    """The CSV export, a header line then one line per entry (RFC 4180, CRLF line ends);
    ``before``/``after`` are JSON text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def flush() -> str:
        value = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return value

    writer.writerow(CSV_COLUMNS)
    yield flush()
    for entry in entries:
        writer.writerow(
            [
                entry.at.isoformat(),
                _csv_safe(entry.actor_name),
                entry.action,
                _csv_safe(entry.target),
                _csv_safe(entry.message),
                _json_cell(entry.before),
                _json_cell(entry.after),
            ]
        )
        yield flush()
