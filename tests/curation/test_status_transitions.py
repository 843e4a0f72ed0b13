"""Status changes happen only through the review services, each as a version, with an audit event."""

import pytest

from simia_web.core.models import AuditEvent
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import review_decide, review_undo, reviews_bulk
from tests.support.factories import make_trajectory, verdict


@pytest.mark.django_db
def test_decisions_replace_each_other_and_an_undo_goes_back_to_the_pipeline_status(users):
    trajectory = make_trajectory(judge=verdict(passed=False))
    review_decide(trajectory=trajectory, reviewer=users["annotator"], decision="accept", expected_version=1)
    reject = review_decide(
        trajectory=trajectory, reviewer=users["curator"], decision="reject", reason="x", expected_version=2
    )
    accept = Review.objects.get(decision="accept")
    assert accept.superseded_at and accept.superseded_by == users["curator"] and reject.standing
    review_undo(review=reject, actor=users["curator"])
    trajectory.refresh_from_db()
    # The earlier accept was made on a text since decided otherwise: it does not come back, the item waits.
    assert (trajectory.status, trajectory.version) == (TrajectoryStatus.JUDGED_FAIL, 4)
    assert not Review.objects.filter(undone_at__isnull=True, superseded_at__isnull=True).exists()
    changes = list(
        AuditEvent.objects.filter(target_id=str(trajectory.pk), action__in=["trajectory.status", "trajectory.undo"])
        .order_by("id")
        .values_list("data", flat=True)
    )
    assert [(c["from"], c["to"]) for c in changes] == [
        (TrajectoryStatus.JUDGED_FAIL, TrajectoryStatus.ACCEPTED),
        (TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED),
        (TrajectoryStatus.REJECTED, TrajectoryStatus.JUDGED_FAIL),
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
    assert set(Trajectory.objects.values_list("version", flat=True)) == {2}
