"""Decisions: a person accepts, fixes and accepts, or rejects the version they saw, as its next version."""

from django.db import transaction

from simia_web.curation.gate import messages_written
from simia_web.curation.models import Change, Decision, EditorDraft, Review, Trajectory, TrajectoryStatus
from simia_web.curation.rollups import RollupChange
from simia_web.curation.versions import decision_supersede, trajectory_locked, version_advance

from .edits import _status_audit, _text_write
from .holds import RELEASED, ReviewError, _hold_check
from .pipeline import conversation_summary

STATUS_FOR_DECISION: dict[str, str] = {
    Decision.ACCEPT: TrajectoryStatus.ACCEPTED,
    Decision.FIX_ACCEPT: TrajectoryStatus.ACCEPTED,
    Decision.REJECT: TrajectoryStatus.REJECTED,
}


NOT_REVIEWABLE = "This trajectory has no assistant answer (empty or ended on an error); it can only be rejected."


def review_decide(
    *,
    trajectory: Trajectory,
    reviewer,
    decision: str,
    expected_version: int,
    reason: str = "",
    messages: list | None = None,
) -> Review:
    """Record a human decision on the version the reviewer saw, as the next version: a Review row, the new status
    and an audit event, in one transaction.

    Fix and accept stores the edited messages (through the gate) as the new version's text. A decision based on a
    stale version raises StaleVersion, one on an item someone else holds HeldByOther; neither writes anything.
    The decision lets go of the reviewer's hold: the item is done.
    """
    if decision not in STATUS_FOR_DECISION:
        raise ReviewError(f"unknown decision {decision!r}", field="decision")
    reason = (reason or "").strip()
    if decision == Decision.REJECT and not reason:
        raise ReviewError("A rejection needs a reason.", field="reason")
    if decision == Decision.FIX_ACCEPT and messages is None:
        raise ReviewError("Fix and accept needs the fixed messages.", field="messages")
    with transaction.atomic():
        locked = trajectory_locked(trajectory.pk, expected_version)
        _hold_check(locked, reviewer)
        change = RollupChange([locked.pk])
        previous = locked.status
        status = STATUS_FOR_DECISION[decision]
        decision_supersede(locked, reviewer)
        if decision == Decision.FIX_ACCEPT:
            fixed = messages_written(messages, locked.tools)
            if not conversation_summary(messages=fixed, termination_reason=locked.termination_reason)["reviewable"]:
                raise ReviewError(NOT_REVIEWABLE, field="messages")
            _text_write(
                locked,
                fixed,
                actor=reviewer,
                action=Change.FIX_ACCEPT,
                note=reason or "fixed",
                status=status,
                **RELEASED,
            )
        else:
            if decision == Decision.ACCEPT and not locked.reviewable:
                raise ReviewError(NOT_REVIEWABLE, field="decision")
            version_advance(locked, actor=reviewer, action=decision, status=status, **RELEASED)
        review = Review.objects.create(
            trajectory=locked,
            reviewer=reviewer,
            decision=decision,
            reason=reason,
            trajectory_version=locked.version,
            based_on_version=expected_version,
        )
        _status_audit(actor=reviewer, trajectory=locked, previous=previous, reason=reason)
        EditorDraft.objects.filter(trajectory=locked, author=reviewer).delete()
        change.record()
    trajectory.refresh_from_db()
    return review
