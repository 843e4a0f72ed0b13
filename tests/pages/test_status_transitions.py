"""Status changes follow the legal transitions and leave an audit event."""

import pytest

from simia_web.core.models import AuditEvent
from simia_web.curation.models import Trajectory, TrajectoryStatus
from simia_web.curation.services import ReviewError, reviews_bulk, trajectory_status_set

from .factories import make_trajectory, verdict


@pytest.mark.django_db
def test_pipeline_statuses_may_become_human_decisions_and_back_only_to_decisions(users):
    trajectory = make_trajectory(judge=verdict(passed=False))
    trajectory_status_set(trajectory=trajectory, status=TrajectoryStatus.ACCEPTED, actor=users["annotator"])
    trajectory_status_set(trajectory=trajectory, status=TrajectoryStatus.REJECTED, actor=users["curator"], reason="x")
    with pytest.raises(ReviewError, match="cannot go back"):
        trajectory_status_set(trajectory=trajectory, status=TrajectoryStatus.JUDGED_PASS)
    with pytest.raises(ReviewError, match="unknown status"):
        trajectory_status_set(trajectory=trajectory, status="shipped")
    assert Trajectory.objects.get(pk=trajectory.pk).status == TrajectoryStatus.REJECTED
    changes = list(
        AuditEvent.objects.filter(action="trajectory.status", target_id=str(trajectory.pk)).values_list(
            "data", flat=True
        )
    )
    assert [(c["from"], c["to"]) for c in changes] == [
        (TrajectoryStatus.JUDGED_FAIL, TrajectoryStatus.ACCEPTED),
        (TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED),
    ]


@pytest.mark.django_db
def test_bulk_decisions_are_audited(users):
    first, second = make_trajectory(), make_trajectory()
    outcome = reviews_bulk(
        trajectories=Trajectory.objects.filter(pk__in=[first.pk, second.pk]),
        reviewer=users["curator"],
        decision="reject",
        reason="off-policy",
    )
    assert outcome.changed == 2
    assert AuditEvent.objects.filter(action="trajectory.status", data__bulk=True).count() == 2
