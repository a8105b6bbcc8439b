# The tool-health tallies gain the timeouts per limit (``c:<limit_ms>``) and the exact slowest
# finished call (``max_us``): existing tallies are rebuilt once from the rounds' assemblies, as
# ``toolhealth_backfill`` would (docs/tool-health.md).

from datetime import datetime
from typing import Any

from django.db import migrations


def rebuild_tallies(apps: Any, schema_editor: Any) -> None:
    from observe.domain.health import FlatKey, grouped, settled, slot_counts

    round_model = apps.get_model("observe", "Round")
    bucket_model = apps.get_model("observe", "ToolHealthBucket")
    if not bucket_model.objects.exists():
        return
    flat: dict[FlatKey, int] = {}
    rows = round_model.objects.values_list("agent", "assembly")
    for agent, assembly in rows.iterator(chunk_size=500):
        for slot in (assembly or {}).get("slots", {}).values():
            slot_counts(agent, slot, flat, 1)
    bucket_model.objects.all().delete()
    made = []
    for (agent, tool_id, bucket), tally in grouped(flat).items():
        hourly = len(bucket) == 13
        moment = datetime.fromisoformat(f"{bucket}:00:00+00:00" if hourly else f"{bucket}:00+00:00")
        made.append(
            bucket_model(
                agent=agent,
                tool_id=tool_id,
                span=60 if hourly else 5,
                bucket=moment,
                tally=settled(tally),
            )
        )
    bucket_model.objects.bulk_create(made, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("observe", "0008_ingest_count"),
    ]

    operations = [
        migrations.RunPython(rebuild_tallies, migrations.RunPython.noop),
    ]
