"""A part of an export reads its range, not the table: its ranges name the near-duplicates they leave out, and the
reads beside its rows (their decisions, their verdicts) are bounded by the range's ids in an index condition, whatever
statistics PostgreSQL has (here: of tables a test has just written, never analyzed), rather than joined to the range
from a read of every decision. The rows' own read is bounded on the primary key (docs/performance.md has the plans
of a part of 50,000 of 100k rows, before and after ANALYZE)."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from simia_web.accounts.models import User, default_workspace_id
from simia_web.curation.models import Decision, JudgeVerdict, Review, Trajectory
from simia_web.exports.parts import IdRange, export_ranges
from simia_web.exports.records import ROW_FIELDS
from simia_web.exports.selectors import export_filters_clean, export_queryset, export_records

from .data import domain_make, trajectory_make


def test_ranges_name_the_ids_they_leave_out_and_meet(db):
    shop = domain_make()
    ids = [trajectory_make(shop).pk for _ in range(9)]
    leaving = frozenset({ids[0], ids[3], ids[4], ids[8]})
    ranges = export_ranges(Trajectory.objects.all(), 2, leaving=leaving)
    # kept: 1, 2 | 5, 6 | 7; the ids left out before the first kept, between two and after the last go with theirs.
    assert ranges == [
        IdRange(None, ids[5] - 1, (ids[0], ids[3], ids[4])),
        IdRange(ids[5], ids[7] - 1, ()),
        IdRange(ids[7], ids[7], (ids[8],)),
    ]
    assert sum(len(r.left_out) for r in ranges) == len(leaving)
    read = [pk for r in ranges for pk in r.of(Trajectory.objects.order_by("pk")).values_list("pk", flat=True)]
    assert read == [pk for pk in ids if pk not in leaving]
    assert export_ranges(Trajectory.objects.none(), 2, leaving=leaving) == [IdRange(None, 0, ())]


def _scans(plan: dict) -> list[dict]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += _scans(child)
    return nodes


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans")
def test_a_parts_decisions_and_verdicts_are_read_within_its_range(db):
    shop = domain_make()
    reviewer = User.objects.create(username="range-reviewer")
    ids = [trajectory_make(shop).pk for _ in range(40)]
    Review.objects.bulk_create(
        Review(trajectory_id=pk, reviewer=reviewer, decision=Decision.ACCEPT, trajectory_version=1) for pk in ids
    )
    JudgeVerdict.objects.bulk_create(JudgeVerdict(trajectory_id=pk, passed=True, score=0.9) for pk in ids)
    part = IdRange(ids[20], ids[29]).of(export_queryset(export_filters_clean({}), workspace_id=default_workspace_id()))
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        assert [row["id"] for row in export_records(part, ROW_FIELDS, 100)] == ids[20:30]
    plans = {}
    for query in captured.captured_queries:
        table = next(
            name
            for name in ("curation_review", "curation_judgeverdict", "curation_trajectory")
            if name in query["sql"].split(" WHERE ")[0]
        )
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
            plans.setdefault(table, []).append(_scans(cursor.fetchone()[0][0]["Plan"]))
    bound = (f">= {ids[20]}", f"<= {ids[29]}")
    for table in ("curation_review", "curation_judgeverdict"):
        for nodes in plans[table]:
            reads = [node for node in nodes if node.get("Relation Name") == table]
            assert reads and all(all(b in node.get("Index Cond", "") for b in bound) for node in reads), reads
