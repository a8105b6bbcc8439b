"""Fill a database made by an older Traitdeck with rows in every table of its apps (run by
``test_upgrade.py`` inside that older tree: it imports the models the old layout has).

Real rows first (the sample policy, published; a runtime token; a round posted through the
ingest service when the old code has one), then a few generic rows of every concrete model of the
project's apps, each field filled by its type: whatever an app keeps, some of it is there."""

from __future__ import annotations

import datetime as dt
import json
import sys
import uuid
from typing import Any

import django

django.setup()

from django.apps import apps  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, models, transaction  # noqa: E402

PROJECT_APPS = {"accounts", "audit", "policy", "observe", "bridge", "kdcube", "discovery"}
AT = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def value(model: type[models.Model], field: models.Field[Any, Any], i: int) -> Any:
    if field.choices:
        return list(field.flatchoices)[i % len(field.flatchoices)][0]
    if isinstance(field, models.ForeignKey | models.OneToOneField):
        related = field.related_model._default_manager.order_by("pk")
        return related[i % related.count()] if related.exists() else None
    if isinstance(field, models.BooleanField):
        return i % 2 == 0
    if isinstance(field, models.DateTimeField):
        return AT + dt.timedelta(minutes=i)
    if isinstance(field, models.DateField):
        return (AT + dt.timedelta(days=i)).date()
    if isinstance(field, models.FloatField):
        return 1.5 + i
    if isinstance(field, models.IntegerField):  # the big, small and positive ones too
        return 1000 + i
    if isinstance(field, models.JSONField):
        return {"seeded": model.__name__, "row": i}
    if isinstance(field, models.TextField):  # some hold JSON text (OrderedJSONField)
        return json.dumps({"seeded": model.__name__, "row": i})
    if field.name == "event_id":  # ingest stores only canonical UUIDs
        return str(uuid.UUID(int=i + 1))
    if isinstance(field, models.CharField):
        text = f"{model.__name__.lower()}-{field.name}-{i}"
        return text[-(field.max_length or len(text)) :]
    raise TypeError(f"{model.__name__}.{field.name}: no seed value for {type(field).__name__}")


def seed_generic(rows: int) -> None:
    for config in apps.get_app_configs():
        if config.label not in PROJECT_APPS:
            continue
        for model in config.get_models():
            for i in range(rows):
                kwargs = {
                    f.name: value(model, f, i)
                    for f in model._meta.concrete_fields
                    if not f.primary_key
                }
                try:
                    with transaction.atomic():
                        model._default_manager.create(**kwargs)
                except IntegrityError:
                    pass  # e.g. a unique field with fewer choices than rows: fewer rows


def main() -> None:
    get_user_model().objects.create_user("upgrade-admin", password="not-used-upgrade-admin-1")
    call_command("load_sample_policy", verbosity=0)
    call_command("policy", "publish", "--message", "before the upgrade", "--yes", verbosity=0)
    call_command("runtime_token", "create", "upgrade", "--scope", "events:write", verbosity=0)
    seed_generic(int(sys.argv[1]) if len(sys.argv) > 1 else 3)


if __name__ == "__main__":
    main()
