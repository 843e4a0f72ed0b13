"""The queue's sorts each on an index, and a stored search vector of the messages.

Built without locking writers out of a large table: every index concurrently (on PostgreSQL), outside a transaction.
The search vector is kept by a trigger, so every writer (the ORM, a bulk update, COPY) keeps it without knowing of
it, and filled here in batches of ids; its GIN index replaces the one over the expression of migration 0003.
"""

import django.contrib.postgres.search
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models
from django.db.models import F, Value
from django.db.models.functions import Coalesce

TABLE = "curation_trajectory"
OLD_SEARCH_INDEX = "trajectory_messages_search"
SEARCH_INDEX = "trajectory_search_vector"
FILL_BATCH = 20_000
VECTOR = "to_tsvector('simple'::regconfig, COALESCE((NEW.messages)::text, ''))"


class AddQueueIndex(AddIndexConcurrently):
    """Concurrently on PostgreSQL; a plain CREATE INDEX on SQLite, which has no concurrent build."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


def search_vector_install(apps, schema_editor):
    """A trigger computes the vector of a new row, and of a changed row whose messages changed (or that has none);
    existing rows are filled in batches (each its own transaction); then the index, built concurrently."""
    if schema_editor.connection.vendor != "postgresql":
        return
    execute = schema_editor.execute
    execute(
        f"""CREATE OR REPLACE FUNCTION {TABLE}_search_vector() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'INSERT' THEN
            NEW.search_vector := {VECTOR};
          ELSIF NEW.search_vector IS NULL OR NEW.messages IS DISTINCT FROM OLD.messages THEN
            NEW.search_vector := {VECTOR};
          END IF;
          RETURN NEW;
        END $$"""
    )
    execute(
        f"CREATE TRIGGER {TABLE}_search_vector BEFORE INSERT OR UPDATE ON {TABLE} "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_search_vector()"
    )
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), -1) FROM {TABLE}")
        low, high = cursor.fetchone()
        for start in range(low, high + 1, FILL_BATCH):
            cursor.execute(
                f"UPDATE {TABLE} SET search_vector = {VECTOR.replace('NEW.', '')} "
                "WHERE id >= %s AND id < %s AND search_vector IS NULL",
                [start, start + FILL_BATCH],
            )
    execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {SEARCH_INDEX} ON {TABLE} USING gin (search_vector)")
    execute(f"DROP INDEX CONCURRENTLY IF EXISTS {OLD_SEARCH_INDEX}")


def search_vector_uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    execute = schema_editor.execute
    execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {OLD_SEARCH_INDEX} ON {TABLE} "
        "USING gin (to_tsvector('simple'::regconfig, COALESCE((messages)::text, '')))"
    )
    execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SEARCH_INDEX}")
    execute(f"DROP TRIGGER IF EXISTS {TABLE}_search_vector ON {TABLE}")
    execute(f"DROP FUNCTION IF EXISTS {TABLE}_search_vector()")


FILTER_COLUMNS = ("status", "reviewable", "domain", "judge_passed")


def sort_index(name: str, *keys, score: bool = False) -> AddQueueIndex:
    include = (*FILTER_COLUMNS, "judge_score") if score else FILTER_COLUMNS
    return AddQueueIndex(
        model_name="trajectory", index=models.Index(*keys, F("id"), include=include, name=f"trajectory_sort_{name}")
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("curation", "0006_trajectory_fidelity"),
    ]

    operations = [
        migrations.AddField(
            model_name="trajectory",
            name="search_vector",
            field=django.contrib.postgres.search.SearchVectorField(editable=False, null=True),
        ),
        migrations.RunPython(search_vector_install, search_vector_uninstall, elidable=False),
        sort_index("date", F("created_at")),
        sort_index("score", Coalesce(F("judge_score"), Value(2.0)), score=True),
        sort_index("desc_score", Coalesce(F("judge_score"), Value(-1.0)), score=True),
        sort_index("turns", F("turns")),
        sort_index("tools", F("tool_call_count")),
        sort_index("rules", F("violation_count")),
        sort_index("model", F("model")),
    ]
