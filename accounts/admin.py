from __future__ import annotations

from django.contrib import admin

from accounts.models import RuntimeToken


@admin.register(RuntimeToken)
class RuntimeTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "scopes", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["key_id", "secret_hash", "created_at", "last_used_at"]
    search_fields = ["name"]

    def has_add_permission(self, request: object) -> bool:
        # A token made here would have no secret anyone ever saw: use `runtime_token create`.
        return False
