"""Migration 0009 rebuilds tallies kept before the censored timeouts and the exact max: after it,
they say what a rebuild from the stored events says."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from observe.health.tallies import recomputed_tallies, stored_tallies
from observe.models import ToolHealthBucket
from observe.services import events_ingest
from tests.observe.health.test_api import finished, timed_out

BEFORE = [("observe", "0008_ingest_count")]
AFTER = [("observe", "0009_toolhealth_censored_and_exact_max")]


@pytest.mark.django_db(transaction=True)
def test_it_rebuilds_tallies_kept_before_the_exact_max() -> None:
    tool = "workspace_jobs.search"
    events_ingest([finished(tool, f"t{i}", 100.0 + i) for i in range(5)])
    events_ingest([timed_out(tool, "x", 2000)])
    # As a database from before: no c:<limit> counts, no max_us.
    for row in ToolHealthBucket.objects.all():
        row.tally = {
            name: value
            for name, value in row.tally.items()
            if not name.startswith("c:") and name != "max_us"
        }
        row.save()
    assert stored_tallies() != recomputed_tallies()
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    assert stored_tallies() == recomputed_tallies()
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes("observe"))  # as the next tests expect
    (tally,) = [t for (a, tl, b), t in stored_tallies().items() if len(b) == 16]
    assert (tally["max_us"], tally["c:2000"]) == (104_000, 1)
