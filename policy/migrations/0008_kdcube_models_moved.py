# The KDCube models moved to the kdcube app (issue 36), keeping their tables: they leave the policy
# app's state only; no table is touched.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('policy', '0007_kdcube_baseline'),
        ('kdcube', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='KDCubeBundle'),
                migrations.DeleteModel(name='KDCubePush'),
                migrations.DeleteModel(name='KDCubeRead'),
            ],
        ),
    ]
