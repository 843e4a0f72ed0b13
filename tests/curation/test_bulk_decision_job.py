"""A bulk decision over more items than a request writes runs as a job of id ranges (about IDS_PER_UNIT matching
items each, read when it is planned) that any worker takes: it decides what one reviews_bulk over the whole filter
decides, leaves what it leaves (held items, items decided one by one, empty ones when accepting), writes the same
audit trail, all under one batch that the bulk undo takes back whole; a unit delivered again decides nothing twice."""

import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import transaction
from django.http import QueryDict
from django.utils import timezone

from simia_web.accounts.models import default_workspace_id
from simia_web.core.models import AuditEvent
from simia_web.curation.job_kinds import bulk_decision
from simia_web.curation.models import Decision, Review, Trajectory, TrajectoryChange
from simia_web.curation.selectors.queue import queue_filterset, queue_selection
from simia_web.curation.services import review_decide, reviews_bulk, reviews_bulk_queue, reviews_bulk_undo
from simia_web.jobs.models import JobStatus
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
