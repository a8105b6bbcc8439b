"""The indexes a migration makes on PostgreSQL only (its store is partitioned by day; SQLite's
embedded store is not, and reads its one table otherwise): made on every day's partition, now
and when one is created. Not a migration (the loader skips modules named with ``_``)."""

from typing import Any

from django.db import migrations


def postgresql_index(name: str, definition: str) -> migrations.RunPython:
    """``CREATE INDEX IF NOT EXISTS name definition`` forwards, ``DROP INDEX`` backwards; on
    other databases nothing."""

    def create(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} {definition}")

    def drop(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"DROP INDEX IF EXISTS {name}")

    return migrations.RunPython(create, drop, elidable=False)
