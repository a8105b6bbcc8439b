"""Read-only admin for rounds and events: for looking, never for editing.

Rounds are re-assembled from their events on every ingest, so an edit here would be silently
overwritten (or, for an event, disagree with what the runtime sent). Everything is read-only.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from core.vocabulary import COUNT_KEYS
from observe.models import Event, Round, RoundTool


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting goes through `prune_rounds`, which takes the events with their round.
        return False


class RoundToolInline(admin.TabularInline):  # type: ignore[type-arg]
    model = RoundTool
    fields = ["tool_id"]
    readonly_fields = ["tool_id"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Round)
class RoundAdmin(ReadOnlyAdmin):
    list_display = [
        "agent",
        "turn_id",
        "iteration",
        "started_at",
        "outcome",
        "agent_in_policy",
        *COUNT_KEYS,
    ]
    list_filter = ["agent", "outcome", "agent_in_policy", "started_at"]
    search_fields = ["agent", "turn_id", "policy_hash"]
    date_hierarchy = "started_at"
    ordering = ["-started_at", "-id"]
    inlines = [RoundToolInline]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["event_id", "type", "ts", "round_agent", "round"]
    list_filter = ["type", "round__agent", "round__outcome"]
    search_fields = ["event_id", "round__agent", "round__turn_id"]
    list_select_related = ["round"]
    ordering = ["-ts", "-id"]

    @admin.display(description="agent", ordering="round__agent")
    def round_agent(self, obj: Event) -> str:
        return obj.round.agent
