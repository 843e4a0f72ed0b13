import django.db.models.deletion
from django.db import migrations, models


def everyone_into_default(apps, schema_editor):
    """All existing data lives in the `default` workspace; every user is a member with the role they have today,
    and today's admins (who were superusers) are site administrators."""
    Workspace = apps.get_model("accounts", "Workspace")
    Membership = apps.get_model("accounts", "Membership")
    User = apps.get_model("accounts", "User")
    default, _ = Workspace.objects.get_or_create(slug="default", defaults={"name": "Default"})
    Membership.objects.bulk_create(
        [Membership(user_id=pk, workspace=default, role=role or "annotator") for pk, role in User.objects.values_list("pk", "role")],
        ignore_conflicts=True,
    )
    User.objects.update(current_workspace=default)
    User.objects.filter(role="admin").update(is_site_admin=True)


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_role_sets_flags"),
    ]

    operations = [
        migrations.CreateModel(
            name="Workspace",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.SlugField(max_length=64, unique=True)),
                ("name", models.CharField(max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["slug"]},
        ),
        migrations.CreateModel(
            name="Membership",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("role", models.CharField(choices=[("admin", "Admin"), ("curator", "Curator"), ("annotator", "Annotator")], max_length=16)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="memberships", to="accounts.user")),
                ("workspace", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="memberships", to="accounts.workspace")),
            ],
            options={
                "indexes": [models.Index(fields=["workspace", "user"], name="membership_workspace_user")],
                "constraints": [models.UniqueConstraint(fields=("user", "workspace"), name="membership_unique_user_workspace")],
            },
        ),
        migrations.AddField(
            model_name="user",
            name="current_workspace",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="accounts.workspace"),
        ),
        migrations.AddField(
            model_name="user",
            name="is_site_admin",
            field=models.BooleanField(default=False, help_text="Creates workspaces and manages every workspace's members.", verbose_name="site administrator"),
        ),
        migrations.AlterField(
            model_name="user",
            name="role",
            field=models.CharField(blank=True, choices=[("admin", "Admin"), ("curator", "Curator"), ("annotator", "Annotator")], default="annotator", max_length=16),
        ),
        migrations.AddField(
            model_name="user", name="oidc_issuer", field=models.CharField(blank=True, default="", max_length=255)
        ),
        migrations.AddField(
            model_name="user", name="oidc_subject", field=models.CharField(blank=True, default="", max_length=255)
        ),
        migrations.AddConstraint(
            model_name="user",
            constraint=models.UniqueConstraint(condition=models.Q(("oidc_subject", ""), _negated=True), fields=("oidc_issuer", "oidc_subject"), name="user_unique_oidc_identity"),
        ),
        migrations.RunPython(everyone_into_default, migrations.RunPython.noop),
        migrations.RemoveField(model_name="user", name="is_staff"),
        migrations.RemoveField(model_name="user", name="is_superuser"),
        migrations.AddField(
            model_name="user",
            name="is_staff",
            field=models.GeneratedField(db_persist=True, expression=models.Q(("is_site_admin", True)), help_text="Set by the site administrator flag: only they log into the admin site.", output_field=models.BooleanField(), verbose_name="staff status"),
        ),
        migrations.AddField(
            model_name="user",
            name="is_superuser",
            field=models.GeneratedField(db_persist=True, expression=models.Q(("is_site_admin", True)), help_text="Set by the site administrator flag: site administrators have every permission.", output_field=models.BooleanField(), verbose_name="superuser status"),
        ),
    ]
