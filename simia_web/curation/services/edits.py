"""Changes to one trajectory's text and their undoing: edit without deciding, revert to an earlier version's
text, and take back a standing decision. Each is the next version, based on the version the person saw."""

from django.db import transaction
from django.utils import timezone

from simia_web.core.jsonutil import content_hash
from simia_web.core.selectors import revision_list
from simia_web.core.services import audit_record, revision_record
from simia_web.curation.gate import messages_restored, messages_written
from simia_web.curation.models import Change, Decision, EditorDraft, Review, Trajectory, pipeline_status
from simia_web.curation.rollups import RollupChange
from simia_web.curation.signals import trajectory_statuses_changed
from simia_web.curation.versions import decision_supersede, trajectory_locked, version_advance

from .holds import ReviewError, _hold_check, _release_others, _reservation_until
from .pipeline import _duplicates_index, conversation_summary


def _snapshot(trajectory: Trajectory) -> dict:
    return {"messages": trajectory.messages, "tools": trajectory.tools}


def _text_write(locked: Trajectory, messages: list, *, actor, action: str, note: str, detail: str = "", **fields):
    """Write new messages as the next version and its revision (the generated text is kept as a revision first,
    at the version it was current from, so the change shows as a diff)."""
    if not revision_list(obj=locked).exists():
        revision_record(obj=locked, data=_snapshot(locked), note="as generated", version=locked.text_version)
    version_advance(
        locked,
        actor=actor,
        action=action,
        detail=detail,
        messages=messages,
        content_hash=content_hash({"messages": messages, "tools": locked.tools}),
        text_version=locked.version + 1,
        **conversation_summary(messages=messages, termination_reason=locked.termination_reason),
        **fields,
    )
    revision_record(obj=locked, data=_snapshot(locked), author=actor, note=note)
    _duplicates_index(locked, messages)


def _undecided(locked: Trajectory) -> str:
    return pipeline_status(violation_count=locked.violation_count, judge_passed=locked.judge_passed)


def _status_audit(*, actor, trajectory: Trajectory, previous: str, reason: str = "", **data) -> None:
    audit_record(
        actor=actor,
        action="trajectory.status",
        target=trajectory,
        data={"from": previous, "to": trajectory.status, "reason": reason, **data},
    )
    trajectory_statuses_changed.send(sender=Trajectory, trajectory_ids=[trajectory.pk])


def trajectory_edit(
    *, trajectory: Trajectory, editor, messages: list, expected_version: int, note: str = ""
) -> Trajectory:
    """Save edited messages as the next version without deciding: the item waits for a person's decision again
    (a decision standing on the old text no longer does). The editor keeps holding it."""
    with transaction.atomic():
        locked = trajectory_locked(trajectory.pk, expected_version)
        _hold_check(locked, editor)
        change = RollupChange([locked.pk])
        edited = messages_written(messages, locked.tools)
        previous = locked.status
        decision_supersede(locked, editor)
        _text_write(
            locked, edited, actor=editor, action=Change.EDIT, note=note.strip() or "edited", status=_undecided(locked)
        )
        if previous != locked.status:
            _status_audit(actor=editor, trajectory=locked, previous=previous, reason="edited")
        EditorDraft.objects.filter(trajectory=locked, author=editor).delete()
        change.record()
    trajectory.refresh_from_db()
    return trajectory


def trajectory_revert(*, trajectory: Trajectory, to_version: int, expected_version: int, actor) -> Trajectory:
    """Make the text an earlier version had the current text again, as the next version (history is kept).

    The item is undecided again: a decision made on the text it replaces no longer stands.
    """
    with transaction.atomic():
        locked = trajectory_locked(trajectory.pk, expected_version)
        _hold_check(locked, actor)
        change = RollupChange([locked.pk])
        revision = revision_list(obj=locked).filter(version__lte=to_version).first() if to_version >= 1 else None
        if revision is None or to_version > locked.version:
            raise ReviewError(f"There is no version {to_version} to go back to.", field="to_version")
        if revision.version == locked.text_version:
            raise ReviewError(f"Version {to_version}'s text is the current text.", field="to_version")
        restored = messages_restored(revision.data["messages"])
        previous = locked.status
        decision_supersede(locked, actor)
        _text_write(
            locked,
            restored,
            actor=actor,
            action=Change.REVERT,
            note=f"reverted to v{to_version}",
            detail=f"to v{to_version}",
            status=_undecided(locked),
        )
        audit_record(actor=actor, action="trajectory.revert", target=locked, data={"to_version": to_version})
        if previous != locked.status:
            _status_audit(actor=actor, trajectory=locked, previous=previous, reason=f"reverted to v{to_version}")
        change.record()
    trajectory.refresh_from_db()
    return trajectory


def review_undo(*, review: Review, actor) -> Trajectory:
    """Take back the decision standing on a trajectory, as the next version: the item waits for a decision again,
    and a fix's text goes back to the text it replaced.

    Only by the person who made it or a curator, and only while nothing has changed the trajectory since; the
    Review row stays, marked undone. The person undoing holds the item (they are about to decide it again).
    """
    if review.reviewer_id != actor.pk and not actor.has_role("curator"):
        raise ReviewError("Only the reviewer or a curator can undo this decision.")
    with transaction.atomic():
        locked = trajectory_locked(review.trajectory_id, review.trajectory_version)
        review = Review.objects.get(pk=review.pk)
        if not review.standing:
            raise ReviewError("This decision no longer stands: it was undone or the trajectory changed since.")
        _hold_check(locked, actor)
        change = RollupChange([locked.pk])
        previous = locked.status
        hold = {"reserved_by": actor, "reserved_until": _reservation_until()}
        if review.decision == Decision.FIX_ACCEPT:
            before = revision_list(obj=locked).filter(version__lt=review.trajectory_version).first()
            _text_write(
                locked,
                before.data["messages"],
                actor=actor,
                action=Change.UNDO,
                note=f"undo of the fix in v{review.trajectory_version}",
                status=_undecided(locked),
                **hold,
            )
        else:
            version_advance(locked, actor=actor, action=Change.UNDO, status=_undecided(locked), **hold)
        _release_others(actor, locked.pk)
        Review.objects.filter(pk=review.pk).update(undone_at=timezone.now(), undone_by=actor)
        audit_record(
            actor=actor,
            action="trajectory.undo",
            target=locked,
            data={"from": previous, "to": locked.status, "review": review.pk},
        )
        change.record()
    return locked
