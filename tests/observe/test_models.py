"""The Round model's counter columns come from the kinds table, with nothing to migrate."""

from __future__ import annotations

from django.db import models

from core.vocabulary import KIND_COUNTERS
from observe.models import Round


def test_it_has_one_whole_number_column_per_kind_after_actions() -> None:
    names = [field.name for field in Round._meta.fields]
    start = names.index("actions") + 1
    assert tuple(names[start : start + len(KIND_COUNTERS)]) == KIND_COUNTERS
    for name in KIND_COUNTERS:
        field = Round._meta.get_field(name)
        assert isinstance(field, models.PositiveIntegerField)
        assert field.default == 0


def test_the_counter_index_covers_every_kind() -> None:
    (index,) = [i for i in Round._meta.indexes if i.name == "round_counters_drift"]
    assert tuple(index.fields) == ("agent", *KIND_COUNTERS, "drift", "started_at")
