# Issue 39: on PostgreSQL, rounds, tool rows and events become tables partitioned by day, every
# row kept (observe.partitions.convert); SQLite keeps its plain tables. The primary and unique
# keys that must include the partition key exist only there, so they are SQL of this operation.

from typing import Any

from django.db import migrations, models
from django.utils import timezone


def partition(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    from observe.partitions import convert

    convert(schema_editor.connection, timezone.now().date())


def unpartition(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    from observe.partitions import revert

    revert(schema_editor.connection)


class AlterFieldBesidePostgres(migrations.AlterField):
    """``day`` NOT NULL: on PostgreSQL :func:`partition` made it so (part of each primary key,
    which no ALTER may loosen); elsewhere the ordinary operation."""

    def database_forwards(self, app_label: str, schema_editor: Any, *args: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            super().database_forwards(app_label, schema_editor, *args)

    def database_backwards(self, app_label: str, schema_editor: Any, *args: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            super().database_backwards(app_label, schema_editor, *args)


class Migration(migrations.Migration):
    dependencies = [
        ("observe", "0010_partition_day"),
    ]

    operations = [
        migrations.RunPython(partition, unpartition, elidable=False),
        AlterFieldBesidePostgres(model_name="round", name="day", field=models.DateField()),
        AlterFieldBesidePostgres(model_name="roundtool", name="day", field=models.DateField()),
        AlterFieldBesidePostgres(model_name="event", name="day", field=models.DateField()),
    ]
