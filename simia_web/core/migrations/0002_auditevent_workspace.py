import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0001_initial"),
        ("accounts", "0003_workspaces"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="workspace",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="accounts.workspace"),
        ),
        migrations.AddIndex(model_name="auditevent", index=models.Index(fields=["actor", "-id"], name="audit_actor_id")),
        migrations.AddIndex(model_name="auditevent", index=models.Index(fields=["action", "-id"], name="audit_action_id")),
        migrations.AddIndex(
            model_name="auditevent", index=models.Index(fields=["target_type", "target_id", "-id"], name="audit_target_id")
        ),
        migrations.AddIndex(model_name="auditevent", index=models.Index(fields=["workspace", "-id"], name="audit_workspace_id")),
    ]
