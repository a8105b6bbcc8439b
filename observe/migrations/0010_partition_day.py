# Issue 39: rounds, their tool rows and their events carry the round's partition day (the UTC day
# it started as first seen); events lose ``received_at``, which nothing read. On SQLite the day is
# filled here; on PostgreSQL migration 0011 fills it while it rebuilds the tables partitioned.

from typing import Any

from django.db import migrations, models


def fill_days(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("UPDATE observe_round SET day = date(started_at)")
        for table in ("observe_event", "observe_roundtool"):
            cursor.execute(
                f"UPDATE {table} SET day = (SELECT r.day FROM observe_round r"
                f" WHERE r.id = {table}.round_id)"
            )


class Migration(migrations.Migration):
    dependencies = [
        ("observe", "0009_toolhealth_censored_and_exact_max"),
    ]

    operations = [
        migrations.AddField(model_name="round", name="day", field=models.DateField(null=True)),
        migrations.AddField(model_name="roundtool", name="day", field=models.DateField(null=True)),
        migrations.AddField(model_name="event", name="day", field=models.DateField(null=True)),
        migrations.RemoveField(model_name="event", name="received_at"),
        migrations.RunPython(fill_days, migrations.RunPython.noop, elidable=False),
    ]
