"""The role groups of DESIGN §6: viewer, editor, publisher."""

from django.db import migrations

ROLES = ("viewer", "editor", "publisher")


def create_groups(apps, schema_editor):  # type: ignore[no-untyped-def]
    group = apps.get_model("auth", "Group")
    for name in ROLES:
        group.objects.get_or_create(name=name)


def remove_groups(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
