# Rounds keep their assembly (observe.domain.rounds.assembly_merge); existing rounds get theirs
# from their stored events, once.

from typing import Any

from django.db import migrations, models


def assemble_existing(apps: Any, schema_editor: Any) -> None:
    from observe.domain.events import stored_event
    from observe.domain.rounds import assembly_merge, assembly_new

    round_model = apps.get_model("observe", "Round")
    event_model = apps.get_model("observe", "Event")
    for row in round_model.objects.all().iterator(chunk_size=500):
        datas = event_model.objects.filter(round_id=row.pk).values_list("data", flat=True)
        row.assembly = assembly_merge(assembly_new(), (stored_event(d) for d in datas))
        row.save(update_fields=["assembly"])


class Migration(migrations.Migration):
    dependencies = [
        ("observe", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="round",
            name="assembly",
            field=models.JSONField(default=dict),
        ),
        migrations.RunPython(assemble_existing, migrations.RunPython.noop),
    ]
