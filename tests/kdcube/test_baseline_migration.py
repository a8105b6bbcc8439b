"""Migration 0007 keeps the existing reads and makes the newest read after a push the guard's
baseline (its hash: reads never kept values), so the guard keeps working across the upgrade."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("policy", "0006_manifests_keep_key_order")]
AFTER = [("policy", "0007_kdcube_baseline")]


@pytest.mark.django_db(transaction=True)
def test_the_last_pushs_read_becomes_the_baseline_and_reads_are_kept() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Read = old.get_model("policy", "KDCubeRead")
    target = "workspace@1 @ http://kdcube (acme/demo)"
    Read.objects.create(target=target, source="push", stored_hash="a" * 64, version=1)
    Read.objects.create(target=target, source="push", stored_hash="b" * 64, version=2)
    Read.objects.create(target=target, source="listener", stored_hash="c" * 64, version=2)
    Read.objects.create(target="other", source="pull", stored_hash="d" * 64)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        new = executor.loader.project_state(AFTER).apps
        Bundle = new.get_model("policy", "KDCubeBundle")
        reads = new.get_model("policy", "KDCubeRead").objects
        assert reads.count() == 4
        assert all(r.changes == [] and r.inert == [] for r in reads.all())
        row = Bundle.objects.get()
        assert (row.target, row.baseline_hash, row.baseline_source) == (target, "b" * 64, "push")
        assert row.baseline is None  # no values were ever kept: the hash only
        assert row.baseline_version == 2
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
