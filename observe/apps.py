from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _uuid_as_text(sender: Any, connection: Any, **kwargs: Any) -> None:
    """On PostgreSQL, ``Event.event_id`` is a ``uuid`` column (16 bytes, issue 39) behind a
    ``CharField``: it reads back as the text it was given, as on SQLite (no other column of
    the project is a ``uuid`` or a ``json``)."""
    if connection.vendor == "postgresql":
        from psycopg.types.string import TextLoader

        connection.connection.adapters.register_loader("uuid", TextLoader)
        # ``Event.data`` was ``json`` text from migration 0011 to 0013 (Django's JSONField reads
        # ``jsonb`` as text and decodes it; ``json`` is the same to it once read as text); since
        # 0013 it is packed bytes (``observe.fields.PackedJSONField``).
        connection.connection.adapters.register_loader("json", TextLoader)


class ObserveConfig(AppConfig):
    name = "observe"

    def ready(self) -> None:
        connection_created.connect(_uuid_as_text, dispatch_uid="observe-uuid-as-text")
