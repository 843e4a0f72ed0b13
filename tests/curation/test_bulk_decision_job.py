"""A bulk decision over more items than a request writes runs as a job of id ranges (about IDS_PER_UNIT matching
items each, read when it is planned) that any worker takes: it decides what one reviews_bulk over the whole filter
decides, leaves what it leaves (held items, items decided one by one, empty ones when accepting), writes the same
audit trail, all under one batch that the bulk undo takes back whole; a unit delivered again decides nothing twice.
A bulk decision too large to undo within a request is undone by a job of ranges, which leaves what has moved on."""

import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import transaction
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone

from simia_web.accounts.models import default_workspace_id
from simia_web.accounts.services import workspace_create
from simia_web.core.models import AuditEvent
from simia_web.curation.job_kinds import bulk_decision, bulk_undo
from simia_web.curation.models import Decision, Review, Trajectory, TrajectoryChange
from simia_web.curation.selectors.queue import queue_filterset, queue_selection
from simia_web.curation.services import (
    BULK_UNDO_JOB_KIND,
    BulkUndoTooLarge,
    ReviewError,
    review_decide,
    reviews_bulk,
    reviews_bulk_queue,
    reviews_bulk_undo,
    reviews_bulk_undo_queue,
)
from simia_web.curation.services import bulk as bulk_services
from simia_web.jobs.models import Job, JobStatus
from simia_web.jobs.services import unit_execute
from tests.support.factories import make_trajectory, verdict

QUERY = "verdict=fail&status=all"


@pytest.fixture
def queue(users):
    """30 items the judge failed in two domains, between items it passed (outside the filter): every 7th held by
    the annotator right now, every 5th decided by a person one by one, three empty (they cannot be accepted)."""
    failed = []
    for i in range(30):
        make_trajectory(["shop", "bank"][i % 2], judge=verdict(passed=True))
        messages = [{"role": "user", "content": f"nothing answered {i}"}] if i in (4, 11, 23) else None
        failed.append(make_trajectory(["shop", "bank"][i % 2], judge=verdict(passed=False), messages=messages))
    for t in failed[::5]:
        review_decide(
            trajectory=t, reviewer=users["annotator"], decision=Decision.REJECT, reason="no", expected_version=1
        )
    Trajectory.objects.filter(pk__in=[t.pk for t in failed[3::7]]).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() + timedelta(minutes=10)
    )
    return [t.pk for t in failed]


def _state(batch) -> dict:
    """What a bulk decision made: the items it decided, every item's status, and its audit trail."""
    return {
        "decided": set(Review.objects.filter(batch=batch).values_list("trajectory_id", flat=True)),
        "statuses": dict(Trajectory.objects.values_list("pk", "status")),
        "audit_events": AuditEvent.objects.filter(action="trajectory.status", data__bulk=True).count(),
        "changes": TrajectoryChange.objects.filter(detail="bulk").count(),
    }


def _single_pass(curator) -> tuple[dict, dict]:
    """reviews_bulk over the whole filter, in one transaction, rolled back: (its counts, what it made)."""
    filterset = queue_filterset(
        params=QueryDict(QUERY), request=SimpleNamespace(user=curator), workspace_ids=[default_workspace_id()]
    )
    with transaction.atomic():
        outcome = reviews_bulk(trajectories=queue_selection(filterset.qs), reviewer=curator, decision=Decision.ACCEPT)
        made = _state(outcome.batch)
        transaction.set_rollback(True)
    counts = {name: getattr(outcome, name) for name in bulk_decision.COUNTS}
    return counts, made


def test_a_ranged_job_decides_as_the_single_pass_and_its_undo_takes_every_range_back(eager, users, queue, monkeypatch):
    curator = users["curator"]
    counts, single = _single_pass(curator)
    assert counts == {"changed": 18, "held": 4, "decided": 5, "unreviewable": 3}
    before = _state(uuid.uuid4())
    monkeypatch.setattr(bulk_decision, "IDS_PER_UNIT", 4)

    job = reviews_bulk_queue(query=QUERY, reviewer=curator, decision=Decision.ACCEPT)
    job.refresh_from_db()

    assert job.status == JobStatus.SUCCEEDED, job.error
    batch = uuid.UUID(job.params["batch"])
    assert _state(batch) == single
    assert {name: job.summary[name] for name in bulk_decision.COUNTS} == counts
    units = list(job.units.order_by("id"))
    assert len(units) == 8  # 30 matching items, 4 a unit: ranges of the matches, not of the ids between them
    handled = [sum(unit.result[name] for name in bulk_decision.COUNTS) for unit in units]
    assert handled == [4] * 7 + [2]
    assert all(unit.params["to"] <= later.params["from"] for unit, later in zip(units, units[1:], strict=False))

    # The first unit's message again (a redelivery): it is done, and decides nothing.
    unit_execute(unit_id=units[0].pk)
    assert _state(batch) == single
    # Running a unit decides nothing until the engine calls its writer, once, in the transaction that marks it done.
    bulk_decision.BulkDecisionKind().run(job, units[1])
    assert _state(batch) == single

    undone = reviews_bulk_undo(batch=batch, actor=curator, workspace_ids=[default_workspace_id()])
    assert (undone.undone, undone.moved_on, undone.held) == (18, 0, 0)
    after = _state(uuid.uuid4())
    assert after["statuses"] == before["statuses"]
    assert not Review.objects.filter(batch=batch, undone_at__isnull=True).exists()
    assert after["audit_events"] == before["audit_events"] + counts["changed"]
    assert AuditEvent.objects.filter(action="trajectory.undo", data__bulk=True).count() == counts["changed"]


def test_a_bulk_decision_too_large_for_a_request_is_undone_by_a_job_of_ranges(eager, users, queue, monkeypatch):
    curator = users["curator"]
    before = _state(uuid.uuid4())["statuses"]
    decided = reviews_bulk_queue(query=QUERY, reviewer=curator, decision=Decision.ACCEPT)
    batch = uuid.UUID(decided.params["batch"])
    items = sorted(Review.objects.filter(batch=batch).values_list("trajectory_id", flat=True))
    assert len(items) == 18
    # Since the bulk decision: one item decided again by a person, one held by the annotator right now.
    moved = Trajectory.objects.get(pk=items[2])
    review_decide(
        trajectory=moved, reviewer=curator, decision=Decision.REJECT, reason="no", expected_version=moved.version
    )
    Trajectory.objects.filter(pk=items[9]).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() + timedelta(minutes=10)
    )
    after_decision = _state(batch)["statuses"]
    monkeypatch.setattr(bulk_services, "BULK_UNDO_MAX", 5)
    monkeypatch.setattr(bulk_undo, "IDS_PER_UNIT", 4)
    workspaces = [default_workspace_id()]

    with pytest.raises(BulkUndoTooLarge):
        reviews_bulk_undo(batch=batch, actor=curator, workspace_ids=workspaces)
    with pytest.raises(ReviewError, match="Only the reviewer or a curator"):
        reviews_bulk_undo_queue(batch=batch, actor=users["annotator"], workspace_ids=workspaces)
    other = workspace_create(slug="team-b").pk
    with pytest.raises(ReviewError, match="no such bulk decision"):
        reviews_bulk_undo_queue(batch=batch, actor=curator, workspace_ids=[other])

    job = reviews_bulk_undo_queue(batch=batch, actor=curator, workspace_ids=workspaces)
    job.refresh_from_db()

    assert job.status == JobStatus.SUCCEEDED, job.error
    assert {name: job.summary[name] for name in bulk_undo.COUNTS} == {"undone": 16, "moved_on": 1, "held": 1}
    units = list(job.units.order_by("id"))
    assert len(units) == 5  # 18 items, 4 a unit
    statuses = _state(batch)["statuses"]
    kept = {items[2], items[9]}
    assert {pk: s for pk, s in statuses.items() if pk not in kept} == {
        pk: s for pk, s in before.items() if pk not in kept
    }
    assert {pk: statuses[pk] for pk in kept} == {pk: after_decision[pk] for pk in kept}
    undone = Review.objects.filter(batch=batch, undone_at__isnull=False)
    assert undone.count() == 16 and set(undone.values_list("undone_by", flat=True)) == {curator.pk}
    assert AuditEvent.objects.filter(action="trajectory.undo", data__bulk=True).count() == 16

    # A unit's message again (a redelivery), or its run without the writer the engine calls once: nothing changes.
    versions = dict(Trajectory.objects.values_list("pk", "version"))
    unit_execute(unit_id=units[0].pk)
    bulk_undo.BulkUndoKind().run(job, units[1])
    assert dict(Trajectory.objects.values_list("pk", "version")) == versions

    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING)
    with pytest.raises(ReviewError, match=f"Job {job.pk} is undoing"):
        reviews_bulk_undo_queue(batch=batch, actor=curator, workspace_ids=workspaces)


def test_the_undo_of_a_large_bulk_decision_is_queued_from_its_toast_or_its_job_page(
    eager, users, queue, client_for, monkeypatch
):
    monkeypatch.setattr(bulk_services, "BULK_UNDO_MAX", 5)
    decided = reviews_bulk_queue(query=QUERY, reviewer=users["curator"], decision=Decision.ACCEPT)
    page = reverse("job-detail", args=[decided.pk])

    assert 'id="bulk-job-undo"' not in client_for("annotator").get(page).content.decode()
    client = client_for("curator")
    assert 'id="bulk-job-undo"' in client.get(page).content.decode()
    response = client.post(reverse("review-bulk-undo"), {"batch": decided.params["batch"], "next": page})

    undo = Job.objects.get(kind=BULK_UNDO_JOB_KIND)
    assert response.status_code == 302 and response["Location"] == reverse("job-detail", args=[undo.pk])
    assert undo.params["batch"] == decided.params["batch"] and undo.summary["undone"] == 18
