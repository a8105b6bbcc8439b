# The newest-first pages (observe.selectors.newest_rounds) ask the newest days' partitions first
# and read the rounds of older days whose ``started_at`` moved past their partition's day (a
# ``round.started`` that arrived after other events of its round) from this index: a few rows,
# often none, so each older day's partition answers from an index page or two instead of the
# top of its ``round_newest`` index and a row. On PostgreSQL only (SQLite's store is not
# partitioned: its pages read one index). The condition is the selector's own expression.

from django.db import migrations

from observe.migrations._postgresql import postgresql_index


class Migration(migrations.Migration):
    dependencies = [
        ("observe", "0014_pages_round_longest"),
    ]

    operations = [
        postgresql_index(
            "round_moved",
            "ON observe_round (started_at DESC, id DESC)"
            " WHERE day < (started_at AT TIME ZONE 'UTC')::date",
        )
    ]
