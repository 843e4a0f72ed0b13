"""The rows records are built from: read as one JSON text per row, with the decisions and verdicts read beside them
in trajectory order, they are the values the ORM gives, value for value and type for type, so the bytes written do
not change."""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.db.models import JSONField, OuterRef, Subquery
from django.utils import timezone

from simia_web.accounts.models import User, default_workspace_id
from simia_web.curation.models import STANDING, Decision, JudgeVerdict, Review, Trajectory
from simia_web.exports.records import ROW_FIELDS, record_rows
from simia_web.exports.selectors import DECISION, VERDICT, export_filters_clean, export_queryset
from simia_web.exports.writers import SIMULATION_FIELDS

from .data import TOOLS, domain_make, task_make, trajectory_make


def _as_the_orm_reads_them(queryset, fields) -> list[dict]:
    """The rows as values() gives them, each decision and verdict looked up per row."""
    decision = Review.objects.filter(STANDING, trajectory=OuterRef("pk")).order_by("-id").values(json=DECISION)[:1]
    verdict = JudgeVerdict.objects.filter(trajectory=OuterRef("pk"), error="")
    verdict = verdict.order_by("-trajectory_version", "-id").values(json=VERDICT)[:1]
    rows = queryset.annotate(
        decision=Subquery(decision, output_field=JSONField()), verdict=Subquery(verdict, output_field=JSONField())
    )
    return list(rows.order_by("pk").values(*fields))


def _exact(rows: list[dict]) -> str:
    """Rows as text that tells 1 from 1.0 and keeps integers of any size."""
    return json.dumps(rows, sort_keys=True, default=str)


@pytest.fixture
def varied(db):
    """Trajectories whose values are easy to read back wrong: whole and inexact floats, dates with and without
    trailing zeros in their microseconds, integers beyond 64 bits, text beyond ASCII, several verdicts and
    decisions of which one counts, and none."""
    domain = domain_make()
    task = task_make(domain, external_id="task-7")
    reviewer = User.objects.create(username="reviewer")
    big_tools = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "parameters": {"type": "object", "maximum": 2**70}}}]
    made = [
        trajectory_make(domain, reward=1.0, score=0.1 + 0.2, task=task, provenance={"seed": -(2**65)}),
        trajectory_make(domain, reward=0.30000000000000004, score=1.0, steps={"2": {"state_after": {"n": 1.5}}}),
        trajectory_make(domain, score=None, messages=[{"role": "user", "content": 'héllo 🙂 \\ " \n'}]),
    ]
    created = [datetime(2026, 1, 2, 3, 4, 5, 123400, tzinfo=UTC), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)]
    for trajectory, at in zip(made, created, strict=False):
        Trajectory.objects.filter(pk=trajectory.pk).update(created_at=at)
    first, second, _ = made
    with connection.cursor() as cursor:  # the ORM writes these columns with orjson, which refuses such integers
        cursor.execute("UPDATE curation_trajectory SET tools = %s WHERE id = %s", [json.dumps(big_tools), second.pk])
    verdict, review = JudgeVerdict.objects.create, Review.objects.create
    verdict(trajectory=first, passed=True, score=0.9, trajectory_version=1)
    verdict(trajectory=first, passed=False, score=0.1 + 0.2, scores={"a": 0.5}, trajectory_version=2)
    verdict(trajectory=first, passed=None, error="timeout", trajectory_version=3)
    verdict(trajectory=second, passed=True, score=1.0, scores={"a": 1}, trajectory_version=1)
    now = timezone.now()
    review(trajectory=first, reviewer=reviewer, decision=Decision.REJECT, trajectory_version=1)
    Review.objects.filter(trajectory=first).update(superseded_at=now)
    review(trajectory=first, reviewer=reviewer, decision=Decision.ACCEPT, trajectory_version=2)
    review(trajectory=second, reviewer=reviewer, decision=Decision.ACCEPT, bulk=True, trajectory_version=1)
    Review.objects.filter(trajectory=second).update(undone_at=now)
    review(trajectory=second, reviewer=reviewer, decision=Decision.ACCEPT, trajectory_version=1)
    return made


@pytest.mark.parametrize("fields", [ROW_FIELDS, SIMULATION_FIELDS], ids=["records", "simulations"])
def test_rows_read_for_records_are_the_values_the_orm_gives(varied, fields):
    queryset = export_queryset(export_filters_clean({"status": "all"}), workspace_id=default_workspace_id())
    with transaction.atomic():
        read = list(record_rows(queryset, fields))
    expected = _as_the_orm_reads_them(queryset, fields)
    assert [row["id"] for row in read] == [t.pk for t in varied]
    assert _exact(read) == _exact(expected)
    assert read[0]["verdict"]["version"] == 2 and read[0]["decision"]["decision"] == Decision.ACCEPT
    assert read[2]["decision"] is None and read[2]["verdict"] is None


def test_rows_of_a_filtered_export_carry_only_their_own_decisions_and_verdicts(varied):
    queryset = export_queryset(
        export_filters_clean({"status": "all", "min_score": "0.5"}), workspace_id=default_workspace_id()
    )
    with transaction.atomic():
        read = list(record_rows(queryset))
    assert [row["id"] for row in read] == [varied[1].pk]
    assert _exact(read) == _exact(_as_the_orm_reads_them(queryset, ROW_FIELDS))
