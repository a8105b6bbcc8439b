# Whether a round's row lies in a day before its ``round.started``'s, or none is stored yet (ingest
# writes it with every round): a batch that starts a round looks it up from the day before its
# ``round.started`` on, and, in every day, among these rows — a round first stored from events
# stamped days before its ``round.started`` lies in that earlier day. The rows stored before this
# migration are NULL, not known: they are in the index until retention drops their days (the
# column is added without a rewrite; the index is built over them once). The index is
# PostgreSQL's only (SQLite's store is not partitioned: a round is found by its one unique key).

from django.db import migrations, models

from observe.migrations._postgresql import postgresql_index


class Migration(migrations.Migration):
    dependencies = [
        ("observe", "0015_pages_round_moved"),
    ]

    operations = [
        migrations.AddField(
            model_name="round",
            name="before_start",
            field=models.BooleanField(default=None, null=True),
        ),
        postgresql_index(
            "round_before_start",
            "ON observe_round (agent, turn_id, iteration) WHERE before_start IS NOT FALSE",
        ),
    ]
