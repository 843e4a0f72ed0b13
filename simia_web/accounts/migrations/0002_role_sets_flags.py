import simia_web.accounts.models
from django.db import migrations, models


def superusers_become_admins(apps, schema_editor):
    """A superuser made by `createsuperuser` kept the default role: it acted as an admin, so it is one now."""
    apps.get_model("accounts", "User").objects.filter(is_superuser=True).update(role="admin")


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
    ]

    operations = [
        migrations.AlterModelManagers(
            name='user',
            managers=[
                ('objects', simia_web.accounts.models.UserManager()),
            ],
        ),
        migrations.RunPython(superusers_become_admins, migrations.RunPython.noop),
        migrations.RemoveField(model_name='user', name='is_staff'),
        migrations.RemoveField(model_name='user', name='is_superuser'),
        migrations.AddField(
            model_name='user',
            name='is_staff',
            field=models.GeneratedField(db_persist=True, expression=models.Q(('role', 'admin')), help_text='Set by the role: only admins log into the admin site.', output_field=models.BooleanField(), verbose_name='staff status'),
        ),
        migrations.AddField(
            model_name='user',
            name='is_superuser',
            field=models.GeneratedField(db_persist=True, expression=models.Q(('role', 'admin')), help_text='Set by the role: admins have every permission.', output_field=models.BooleanField(), verbose_name='superuser status'),
        ),
    ]
