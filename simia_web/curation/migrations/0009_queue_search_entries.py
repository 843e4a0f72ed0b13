"""The queue's text search in a narrow table of its own (curation.models.QueueSearchEntry).

On PostgreSQL a trigger on the trajectory keeps one entry per trajectory waiting for review, in the same statement
as every write (the ORM, a bulk update, COPY); the entries are filled from the rows already there inside this
migration's transaction, after the trigger is in place, so no write in between is missed. The entries' vectors
are stored out of line (toast_tuple_target), which keeps the rows a search reads small. Their GIN index replaces
the partial one over the trajectories waiting for review (migration 0007).
"""

import django.contrib.postgres.search
from django.db import migrations, models

TABLE = "curation_trajectory"
ENTRIES = "curation_queuesearchentry"
OLD_PENDING_SEARCH_INDEX = "trajectory_search_pending"
SEARCH_INDEX = "queue_search_vector"
# The queue's default filter (curation.models.PENDING_STATUSES, reviewable) as of this migration.
PENDING = "NEW.reviewable AND NEW.status IN ('generated', 'rules_failed', 'judged_pass', 'judged_fail')"
COLUMNS = (
    "id",
    "priority",
    "judge_confidence",
    "judge_score",
    "judge_passed",
    "domain_id",
    "domain_name",
    "created_at",
    "turns",
    "tool_call_count",
    "violation_count",
    "model",
    "search_vector",
)
# What an entry holds and whether there is one: an update that changes none of these leaves the entry alone.
WATCHED = ("reviewable", "status", *COLUMNS[1:])


def entries_install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    execute = schema_editor.execute
    columns = ", ".join(COLUMNS)
    updates = ", ".join(f"{column} = EXCLUDED.{column}" for column in COLUMNS[1:])
    execute(f"ALTER TABLE {ENTRIES} SET (toast_tuple_target = 128)")
    execute(
        f"""CREATE OR REPLACE FUNCTION {TABLE}_queue_search() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP <> 'DELETE' AND {PENDING} THEN
            INSERT INTO {ENTRIES} ({columns}) VALUES ({", ".join(f"NEW.{column}" for column in COLUMNS)})
            ON CONFLICT (id) DO UPDATE SET {updates};
          ELSIF TG_OP <> 'INSERT' THEN
            DELETE FROM {ENTRIES} WHERE id = OLD.id;
          END IF;
          RETURN NULL;
        END $$"""
    )
    changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in WATCHED)
    # AFTER triggers: the row's stored generated priority and the vector and domain name of migration 0007's
    # BEFORE trigger are in NEW by then.
    execute(
        f"CREATE TRIGGER {TABLE}_queue_search_insert AFTER INSERT ON {TABLE} "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_queue_search()"
    )
    execute(
        f"CREATE TRIGGER {TABLE}_queue_search_update AFTER UPDATE ON {TABLE} "
        f"FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION {TABLE}_queue_search()"
    )
    execute(
        f"CREATE TRIGGER {TABLE}_queue_search_delete AFTER DELETE ON {TABLE} "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_queue_search()"
    )
    execute(
        f"INSERT INTO {ENTRIES} ({columns}) SELECT {columns} FROM {TABLE} "
        f"WHERE {PENDING.replace('NEW.', '')} ON CONFLICT (id) DO NOTHING"
    )
    execute(f"CREATE INDEX {SEARCH_INDEX} ON {ENTRIES} USING gin (search_vector)")
    execute(f"ANALYZE {ENTRIES}")  # the search's choice of plan reads the words' frequencies from these statistics
    execute(f"DROP INDEX IF EXISTS {OLD_PENDING_SEARCH_INDEX}")


def entries_uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    execute = schema_editor.execute
    execute(
        f"CREATE INDEX IF NOT EXISTS {OLD_PENDING_SEARCH_INDEX} ON {TABLE} USING gin (search_vector) "
        f"WHERE {PENDING.replace('NEW.', '')}"
    )
    for event in ("insert", "update", "delete"):
        execute(f"DROP TRIGGER IF EXISTS {TABLE}_queue_search_{event} ON {TABLE}")
    execute(f"DROP FUNCTION IF EXISTS {TABLE}_queue_search()")


class Migration(migrations.Migration):
    dependencies = [
        ("curation", "0008_rollups"),
    ]

    operations = [
        migrations.CreateModel(
            name="QueueSearchEntry",
            fields=[
                ("id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("priority", models.SmallIntegerField()),
                ("judge_confidence", models.FloatField(null=True)),
                ("judge_score", models.FloatField(null=True)),
                ("judge_passed", models.BooleanField(null=True)),
                ("domain_id", models.BigIntegerField()),
                ("domain_name", models.CharField(max_length=80)),
                ("created_at", models.DateTimeField()),
                ("turns", models.PositiveIntegerField()),
                ("tool_call_count", models.PositiveIntegerField()),
                ("violation_count", models.PositiveIntegerField()),
                ("model", models.CharField(max_length=120)),
                ("search_vector", django.contrib.postgres.search.SearchVectorField()),
            ],
        ),
        migrations.RunPython(entries_install, entries_uninstall),
    ]
