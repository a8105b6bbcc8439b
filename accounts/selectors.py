"""Read-side queries for accounts."""

from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import RuntimeToken


def runtime_token_list() -> QuerySet[RuntimeToken]:
    return RuntimeToken.objects.order_by("name")
