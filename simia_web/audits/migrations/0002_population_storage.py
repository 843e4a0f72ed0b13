"""An audit's packed population arrays are stored out of line without compression on PostgreSQL: they are numbers
that do not compress much, and compressing a million members' arrays cost about a second of the audit's creation."""

from django.db import migrations

COLUMNS = ("ids", "text_versions", "inclusion", "predictions")


def storage(apps, schema_editor, kind):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("audits", "AuditPopulation")._meta.db_table)
    for column in COLUMNS:
        schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN {schema_editor.quote_name(column)} SET STORAGE {kind}")


class Migration(migrations.Migration):
    dependencies = [("audits", "0001_initial")]

    operations = [
        migrations.RunPython(
            lambda apps, editor: storage(apps, editor, "EXTERNAL"),
            lambda apps, editor: storage(apps, editor, "EXTENDED"),
        )
    ]
