# The KDCube models move here from the policy app (issue 36). Their tables keep the names the
# policy app gave them (``db_table``), so this creates them in Django's state only: a fresh
# database got them from policy's 0005/0007, an old one already holds them with their rows.

from typing import Any

from django.db import migrations, models

MODELS = ("kdcubebundle", "kdcubepush", "kdcuberead")


def content_types_follow(apps: Any, schema_editor: Any) -> None:
    """An old database's content types (and the permissions on them) name the policy app: they
    follow the models, so no stale types and no duplicate permissions are left behind."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="policy", model__in=MODELS).update(app_label="kdcube")


def content_types_back(apps: Any, schema_editor: Any) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="kdcube", model__in=MODELS).update(app_label="policy")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('policy', '0007_kdcube_baseline'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='KDCubeBundle',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('target', models.CharField(max_length=300, unique=True)),
                        ('baseline_hash', models.CharField(blank=True, max_length=64)),
                        ('baseline', models.JSONField(blank=True, null=True)),
                        ('baseline_source', models.CharField(blank=True, max_length=16)),
                        ('baseline_version', models.PositiveIntegerField(blank=True, null=True)),
                        ('baseline_at', models.DateTimeField(blank=True, null=True)),
                        ('push_until', models.DateTimeField(blank=True, null=True)),
                        ('read_at', models.DateTimeField(blank=True, null=True)),
                        ('read_pending_until', models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        'db_table': 'policy_kdcubebundle',
                    },
                ),
                migrations.CreateModel(
                    name='KDCubePush',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('version', models.PositiveIntegerField(db_index=True)),
                        ('target', models.CharField(max_length=300)),
                        ('status', models.CharField(max_length=16)),
                        ('answer', models.TextField(blank=True)),
                        ('subtree_hash', models.CharField(blank=True, max_length=64)),
                        ('actor_name', models.CharField(max_length=150)),
                        ('at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'policy_kdcubepush',
                        'ordering': ['-at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='KDCubeRead',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('target', models.CharField(max_length=300)),
                        ('source', models.CharField(max_length=16)),
                        ('stored_hash', models.CharField(max_length=64)),
                        ('version', models.PositiveIntegerField(blank=True, null=True)),
                        ('differs', models.JSONField(default=list)),
                        ('updated_by', models.CharField(blank=True, max_length=150)),
                        ('changes', models.JSONField(default=list)),
                        ('inert', models.JSONField(default=list)),
                        ('at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'policy_kdcuberead',
                        'ordering': ['-at', '-id'],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_follow, content_types_back),
    ]
