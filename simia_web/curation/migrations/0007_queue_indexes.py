"""The queue's sorts each on an index, and a stored search vector of the messages.

Built without locking writers out of a large table: every index concurrently (on PostgreSQL), outside a transaction.
The search vector and the domain's name are kept by a trigger, so every writer (the ORM, a bulk update, COPY) keeps
them without knowing of them, and filled here in batches of ids; the vector's GIN indexes (every row, and the rows
waiting for review) replace the one over the expression of migration 0003.
"""

import django.contrib.postgres.search
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models
from django.db.models import F, Value
from django.db.models.functions import Coalesce

TABLE = "curation_trajectory"
OLD_SEARCH_INDEX = "trajectory_messages_search"
SEARCH_INDEX = "trajectory_search_vector"
PENDING_SEARCH_INDEX = "trajectory_search_pending"
# The queue's default filter (curation.models.PENDING_STATUSES, reviewable) as of this migration.
PENDING = "reviewable AND status IN ('generated', 'rules_failed', 'judged_pass', 'judged_fail')"
FILL_BATCH = 20_000
VECTOR = "to_tsvector('simple'::regconfig, COALESCE((NEW.messages)::text, ''))"
DOMAIN_NAME = "(SELECT name FROM catalog_domain WHERE id = NEW.domain_id)"


class ConcurrentlyOnPostgres:
    """An index operation concurrently on PostgreSQL; the plain one elsewhere (SQLite has no concurrent build)."""

    plain: type

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return self.plain.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return self.plain.database_backwards(self, app_label, schema_editor, from_state, to_state)


class AddQueueIndex(ConcurrentlyOnPostgres, AddIndexConcurrently):
    plain = migrations.AddIndex


class RemoveQueueIndex(ConcurrentlyOnPostgres, RemoveIndexConcurrently):
    plain = migrations.RemoveIndex


def derived_columns_install(apps, schema_editor):
    """A trigger computes the vector of a new row, and of a changed row whose messages changed (or that has none),
    and the domain name of a new row or one moved to another domain; existing rows are filled in batches (each its
    own transaction); then the indexes, built concurrently."""
    if schema_editor.connection.vendor != "postgresql":
        return
    execute = schema_editor.execute
    execute(
        f"""CREATE OR REPLACE FUNCTION {TABLE}_derived() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'INSERT' THEN
            NEW.search_vector := {VECTOR};
            NEW.domain_name := {DOMAIN_NAME};
            RETURN NEW;
          END IF;
          IF NEW.search_vector IS NULL OR NEW.messages IS DISTINCT FROM OLD.messages THEN
            NEW.search_vector := {VECTOR};
          END IF;
          IF NEW.domain_name = '' OR NEW.domain_id IS DISTINCT FROM OLD.domain_id THEN
            NEW.domain_name := {DOMAIN_NAME};
          END IF;
          RETURN NEW;
        END $$"""
    )
    execute(
        f"CREATE TRIGGER {TABLE}_derived BEFORE INSERT OR UPDATE ON {TABLE} "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_derived()"
    )
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), -1) FROM {TABLE}")
        low, high = cursor.fetchone()
        for start in range(low, high + 1, FILL_BATCH):
            cursor.execute(  # the trigger fills a row that has no vector or no domain name
                f"UPDATE {TABLE} SET search_vector = NULL WHERE id >= %s AND id < %s AND search_vector IS NULL",
                [start, start + FILL_BATCH],
            )
    execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {SEARCH_INDEX} ON {TABLE} USING gin (search_vector)")
    execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {PENDING_SEARCH_INDEX} ON {TABLE} USING gin (search_vector) "
        f"WHERE {PENDING}"
    )
    execute(f"DROP INDEX CONCURRENTLY IF EXISTS {OLD_SEARCH_INDEX}")


def derived_columns_uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    execute = schema_editor.execute
    execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {OLD_SEARCH_INDEX} ON {TABLE} "
        "USING gin (to_tsvector('simple'::regconfig, COALESCE((messages)::text, '')))"
    )
    execute(f"DROP INDEX CONCURRENTLY IF EXISTS {PENDING_SEARCH_INDEX}")
    execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SEARCH_INDEX}")
    execute(f"DROP TRIGGER IF EXISTS {TABLE}_derived ON {TABLE}")
    execute(f"DROP FUNCTION IF EXISTS {TABLE}_derived()")


FILTER_COLUMNS = ("status", "reviewable", "domain", "judge_passed")


def sort_index(name: str, *keys, score: bool = False) -> AddQueueIndex:
    include = (*FILTER_COLUMNS, "judge_score") if score else FILTER_COLUMNS
    return AddQueueIndex(
        model_name="trajectory", index=models.Index(*keys, F("id"), include=include, name=f"trajectory_sort_{name}")
    )


QUEUE_ORDER_KEYS = (
    F("priority"),
    Coalesce(-F("judge_confidence"), Value(1.0)),
    Coalesce(F("judge_score"), Value(2.0)),
    -F("id"),
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
        migrations.AddField(
            model_name="trajectory",
            name="domain_name",
            field=models.CharField(blank=True, editable=False, max_length=80),
        ),
        migrations.RunPython(derived_columns_install, derived_columns_uninstall, elidable=False),
        sort_index("date", F("created_at")),
        sort_index("score", Coalesce(F("judge_score"), Value(2.0)), score=True),
        sort_index("desc_score", Coalesce(F("judge_score"), Value(-1.0)), score=True),
        sort_index("turns", F("turns")),
        sort_index("tools", F("tool_call_count")),
        sort_index("rules", F("violation_count")),
        sort_index("model", F("model")),
        sort_index("domain", F("domain_name")),
        AddQueueIndex(
            model_name="trajectory",
            index=models.Index(
                *QUEUE_ORDER_KEYS,
                include=(*FILTER_COLUMNS, "judge_confidence", "judge_score"),
                name="trajectory_queue_filtered",
            ),
        ),
        RemoveQueueIndex(model_name="trajectory", name="trajectory_queue_order"),
    ]
