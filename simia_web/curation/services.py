"""Writes to trajectories: creation by the pipelines, verdicts, and people's work on them (holds, decisions,
edits, reverts, undo, bulk actions, editor drafts).

Every change a person makes advances the trajectory's version and names the version it was based on
(curation.versions); a decision stands only while the trajectory stays at the version it made, so an item is
accepted only while its current text is the one a person accepted.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from simia_web.core.errors import HeldByOther, ValidationFailed
from simia_web.core.jsonutil import canonical_bytes, content_hash
from simia_web.core.models import AuditEvent
from simia_web.core.rows import rows_insert
from simia_web.core.selectors import revision_list
from simia_web.core.services import audit_record, revision_record
from simia_web.dedup.services import item_index
from simia_web.formats.conversation import conversation_text
from simia_web.jobs.models import Job
from simia_web.jobs.services import job_create

from .duplicates import TRAJECTORIES, cluster_member_ids
from .gate import messages_restored, messages_written
from .models import (
    STANDING,
    Change,
    Decision,
    EditorDraft,
    JudgeVerdict,
    Review,
    RuleViolation,
    Trajectory,
    TrajectoryChange,
    TrajectoryStatus,
    pipeline_status,
)
from .rollups import RollupChange, rollups_add
from .selectors.queue import queue_after
from .selectors.trajectory import reservation_holder
from .signals import trajectory_statuses_changed
from .versions import decision_supersede, trajectory_locked, version_advance


def trajectory_status_for(*, violations: list, verdict: dict | None) -> str:
    """Rules first: any unfixed violation fails; then the judge decides; no verdict means generated."""
    return pipeline_status(
        violation_count=sum(1 for v in violations if not v.fixed), judge_passed=(verdict or {}).get("passed")
    )


@transaction.atomic(savepoint=False)
def trajectory_create(*, violations: list, verdict: dict | None = None, **fields) -> Trajectory:
    """Store a finished trajectory with its rule violations and judge verdict.

    `violations` are rules.Violation objects; `verdict` is the judge's answer (see judge.verdict_fields).
    """
    fields.setdefault(
        "content_hash", content_hash({"messages": fields.get("messages", []), "tools": fields.get("tools", [])})
    )
    fields.update(
        conversation_summary(
            messages=fields.get("messages", []), termination_reason=fields.get("termination_reason", "")
        )
    )
    fields.setdefault("model", str((fields.get("provenance") or {}).get("model", ""))[:120])
    # Inserted as fixed SQL (core.rows): every unit of a synthesis job writes them, and the ORM's statements cost
    # a worker more CPU than the rest of the write.
    [trajectory] = rows_insert(
        [
            Trajectory(
                status=trajectory_status_for(violations=violations, verdict=verdict),
                violation_count=sum(1 for v in violations if not v.fixed),
                **_verdict_headline(verdict),
                **fields,
            )
        ]
    )
    rows_insert(
        [
            RuleViolation(
                trajectory=trajectory, code=v.code, message_index=v.message_index, detail=v.detail[:2000], fixed=v.fixed
            )
            for v in violations
        ]
    )
    if verdict is not None:
        rows_insert([JudgeVerdict(trajectory=trajectory, **verdict)])
    _duplicates_index(trajectory.pk, trajectory.messages, new=True)
    rollups_add(trajectory)  # last: concurrent writers of the same job and domain wait on these rows till commit
    return trajectory


def _duplicates_index(trajectory_id: int, messages: list, new: bool = False) -> None:
    """Sign the text in the near-duplicate index, in the transaction that writes it."""
    item_index(corpus=TRAJECTORIES, item_id=trajectory_id, text=conversation_text(messages or []), new=new)


# Rollouts that ended on an error hold no conversation worth a person's time.
ERRORED_TERMINATIONS = frozenset({"llm_error", "internal_error"})
PREVIEW_CHARS = 200


def conversation_summary(*, messages: list, termination_reason: str = "") -> dict:
    """The queue row's columns derived from the messages: preview, turns, tool calls, and whether it is reviewable."""
    messages = [m for m in messages or [] if isinstance(m, dict)]
    first_user = next((m.get("content") for m in messages if m.get("role") == "user"), "")
    answered = any(m.get("role") == "assistant" and (m.get("content") or m.get("tool_calls")) for m in messages)
    return {
        "preview": " ".join(str(first_user or "").split())[:PREVIEW_CHARS],
        "turns": sum(1 for m in messages if m.get("role") in ("user", "assistant")),
        "tool_call_count": sum(len(m.get("tool_calls") or []) for m in messages),
        "reviewable": answered and termination_reason not in ERRORED_TERMINATIONS,
    }


def _verdict_headline(verdict: dict | None) -> dict:
    """The verdict numbers the review queue filters and orders on, copied onto the trajectory."""
    if verdict is None:
        return {}
    return {
        "judge_passed": verdict.get("passed"),
        "judge_score": verdict.get("score"),
        "judge_confidence": verdict.get("confidence"),
    }


def verdict_record(*, trajectory_id: int, version: int, verdict: dict) -> JudgeVerdict:
    """Store a judge verdict on `version` of a trajectory (Judge again).

    A failed call (a verdict with `error`) is kept beside the standing verdict and changes nothing else. A verdict
    becomes the headline (queue filters, agreement) only while the text it judged is current, and moves a pipeline
    status; a person's decision stays.
    """
    with transaction.atomic():
        trajectory = Trajectory.objects.select_for_update().get(pk=trajectory_id)
        if verdict.get("error"):
            return JudgeVerdict.objects.create(trajectory=trajectory, trajectory_version=version, **verdict)
        # Even a verdict on older text is the latest verdict agreement reads its profile and criteria from.
        change = RollupChange([trajectory.pk])
        record = JudgeVerdict.objects.create(trajectory=trajectory, trajectory_version=version, **verdict)
        if version >= trajectory.text_version:
            fields = _verdict_headline(verdict)
            if trajectory.status not in HUMAN_STATUSES:
                fields["status"] = pipeline_status(
                    violation_count=trajectory.violation_count, judge_passed=verdict.get("passed")
                )
            Trajectory.objects.filter(pk=trajectory.pk).update(**fields)
        change.record()
    return record


# The job kind of curation.job_kinds.judge (found when the application starts).
JUDGE_JOB_KIND = "judge"


def trajectory_judge_again(*, trajectory: Trajectory, actor) -> Job:
    """Queue a judge job for the trajectory's current version."""
    return job_create(kind=JUDGE_JOB_KIND, params={"versions": {str(trajectory.pk): trajectory.version}}, actor=actor)


HUMAN_STATUSES = frozenset({TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED})


# ---------------------------------------------------------------- holds


class ReviewError(ValidationFailed):
    """A review that cannot be applied (missing reason, invalid edit); `field` names the input at fault."""


# A write's fields that let go of the hold: the work on the item is done.
RELEASED: dict[str, Any] = {"reserved_by": None, "reserved_until": None}


def _reservation_until():
    return timezone.now() + timedelta(seconds=settings.SIMIA_RESERVATION_SECONDS)


def _free_for(user) -> Q:
    return Q(reserved_by__isnull=True) | Q(reserved_until__lt=timezone.now()) | Q(reserved_by=user)


def trajectory_reserve(*, trajectory: Trajectory, user) -> bool:
    """Hold (or keep holding) the trajectory for `user` for SIMIA_RESERVATION_SECONDS unless someone else does.

    Returns True when `user` now holds it. A single conditional UPDATE, so two annotators cannot both win;
    the open review page and the editor call it again before the time runs out.
    """
    until = _reservation_until()
    won = Trajectory.objects.filter(_free_for(user), pk=trajectory.pk).update(reserved_by=user, reserved_until=until)
    if won:
        trajectory.reserved_by, trajectory.reserved_until = user, until
    else:
        trajectory.refresh_from_db(fields=["reserved_by", "reserved_until"])
    return bool(won)


def trajectory_hold(*, trajectory: Trajectory, user) -> bool:
    """Work on this item now (the editor, "start reviewing from here"): `user` lets go of any other item and holds
    this one, unless someone else does. Returns True when `user` holds it."""
    _release_others(user, trajectory.pk)
    return trajectory_reserve(trajectory=trajectory, user=user)


def _release_others(user, keep_id: int) -> None:
    """A person works on one item at a time: their holds on any other go."""
    Trajectory.objects.filter(reserved_by=user).exclude(pk=keep_id).update(**RELEASED)


def trajectory_release(*, trajectory_id: int, user) -> bool:
    """Give up `user`'s hold on a trajectory (the Release button, or the page being left)."""
    return bool(Trajectory.objects.filter(pk=trajectory_id, reserved_by=user).update(**RELEASED))


def trajectory_claim_next(*, queue, user, after_id: int | None = None, sort: str | None = None) -> Trajectory | None:
    """The review stream: release what `user` holds and claim the first free item of `queue` (after `after_id`).

    `queue` is an ordered queryset (selectors.review_queue). Another annotator may claim the same row between
    the read and the conditional UPDATE; then the next free one is tried.
    """
    Trajectory.objects.filter(reserved_by=user).update(**RELEASED)
    candidates = queue.filter(_free_for(user), reviewable=True)
    if after_id is not None:
        candidates = queue_after(candidates, after_id, sort)
    for _ in range(20):
        candidate = candidates.only("pk").first()
        if candidate is None:
            return None
        if trajectory_reserve(trajectory=candidate, user=user):
            return candidate
    return None


def next_free(*, queue, user, after_id: int, sort: str | None = None) -> int | None:
    """The id of the first item of `queue` after `after_id` (or from the head, when it left the queue) that
    nobody else holds: where a decision made outside the stream leads, without claiming it."""
    free = queue.filter(_free_for(user)).exclude(pk=after_id)
    after = queue_after(free, after_id, sort) if queue.filter(pk=after_id).exists() else free
    return after.values_list("pk", flat=True).first() or free.values_list("pk", flat=True).first()


def _hold_check(locked: Trajectory, user) -> None:
    holder = reservation_holder(locked, user)
    if holder is not None:
        raise HeldByOther(f"{holder} is reviewing trajectory {locked.pk} right now.", version=locked.version)


# ---------------------------------------------------------------- changes to one trajectory


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
    _duplicates_index(locked.pk, messages)


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


# ---------------------------------------------------------------- bulk


@dataclass
class BulkOutcome:
    changed: int
    held: int  # reserved by someone else right now
    decided: int  # already carry an individual person's decision, left as they are
    unreviewable: int  # empty or errored, which cannot be accepted
    batch: uuid.UUID | None = None  # names the action for its undo


def bulk_preview(*, trajectories, reviewer, decision: str) -> BulkOutcome:
    """What reviews_bulk would do to these trajectories, for the confirmation that names the counts."""
    return _bulk_split(trajectories, reviewer, decision, lock=False)[0]


def _bulk_split(trajectories, reviewer, decision, *, lock: bool):
    qs = Trajectory.objects.filter(pk__in=trajectories.values("pk"))
    if lock:
        qs = qs.select_for_update()
    individual = Review.objects.filter(STANDING, trajectory=OuterRef("pk"), bulk=False)
    rows = qs.annotate(
        held=~_free_for(reviewer),
        decided=Exists(individual) & Q(status__in=HUMAN_STATUSES),
    ).values_list("pk", "version", "status", "reviewable", "held", "decided")
    outcome, ready = BulkOutcome(0, 0, 0, 0), []
    for pk, version, status, reviewable, held, decided in rows:
        if held:
            outcome.held += 1
        elif decided:
            outcome.decided += 1
        elif decision == Decision.ACCEPT and not reviewable:
            outcome.unreviewable += 1
        else:
            ready.append((pk, version, status))
    outcome.changed = len(ready)
    return outcome, ready


def _bulk_reason(decision: str, reason: str) -> str:
    """The reason of a bulk decision, checked: bulk actions accept or reject, and a rejection says why."""
    if decision not in (Decision.ACCEPT, Decision.REJECT):
        raise ReviewError("Bulk actions can accept or reject, not edit.", field="action")
    reason = (reason or "").strip()
    if decision == Decision.REJECT and not reason:
        raise ReviewError("A rejection needs a reason.", field="reason")
    return reason


@transaction.atomic
def reviews_bulk(
    *,
    trajectories,
    reviewer,
    decision: str,
    reason: str = "",
    batch: uuid.UUID | None = None,
    audit: int | None = None,
) -> BulkOutcome:
    """Accept or reject every trajectory of a queryset at its current version, each as its next version.

    Never touches items another annotator holds, items a person already decided individually, or (when
    accepting) empty and errored ones; the outcome counts each group so the page can say so, and names the
    batch its undo takes back (`batch`: one named by a bulk decision job, whose parts are calls of this).
    `audit` names the audit whose estimate the decision rests on, on every review written.
    """
    reason = _bulk_reason(decision, reason)
    outcome, rows = _bulk_split(trajectories, reviewer, decision, lock=True)
    if not rows:
        return outcome
    outcome.batch = batch or uuid.uuid4()
    status = STATUS_FOR_DECISION[decision]
    ids = [pk for pk, _, _ in rows]
    change = RollupChange(ids)
    Review.objects.filter(STANDING, trajectory_id__in=ids).update(superseded_at=timezone.now(), superseded_by=reviewer)
    Trajectory.objects.filter(pk__in=ids).update(
        status=status, version=F("version") + 1, updated_at=timezone.now(), **RELEASED
    )
    TrajectoryChange.objects.bulk_create(
        TrajectoryChange(trajectory_id=pk, version=version + 1, action=decision, actor=reviewer, detail="bulk")
        for pk, version, _ in rows
    )
    Review.objects.bulk_create(
        Review(
            trajectory_id=pk,
            reviewer=reviewer,
            decision=decision,
            reason=reason,
            trajectory_version=version + 1,
            based_on_version=version,
            bulk=True,
            batch=outcome.batch,
            audit=audit,
        )
        for pk, version, _ in rows
    )
    evidence = {"audit": audit} if audit is not None else {}
    changes = [(pk, previous, status) for pk, _, previous in rows]
    _audit_bulk(reviewer, "trajectory.status", changes, reason=reason, **evidence)
    change.record()
    return outcome


def _audit_bulk(actor, action: str, changes: list[tuple[int, str, str]], **data) -> None:
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor=actor,
            action=action,
            target_type=Trajectory._meta.label_lower,
            target_id=str(pk),
            data={"from": previous, "to": status, "bulk": True, **data},
        )
        for pk, previous, status in changes
    )
    trajectory_statuses_changed.send(sender=Trajectory, trajectory_ids=[pk for pk, _, _ in changes])


# A bulk action this large is undone at once; a larger one item by item, from each item's history.
BULK_UNDO_MAX = 50


@dataclass
class BulkUndoOutcome:
    undone: int
    moved_on: int  # changed since the bulk decision (decided again, edited, reverted, undone): left as they are
    held: int  # someone else is reviewing them right now


def reviews_bulk_undo(*, batch: uuid.UUID, actor) -> BulkUndoOutcome:
    """Take back a bulk decision of up to BULK_UNDO_MAX items: each item still at the version the bulk decision
    made, and not held by someone else, waits for a decision again (as its next version)."""
    with transaction.atomic():
        reviews = list(Review.objects.filter(batch=batch).select_for_update()[: BULK_UNDO_MAX + 1])
        if not reviews:
            raise ReviewError("There is no such bulk decision.", field="batch")
        if len(reviews) > BULK_UNDO_MAX:
            raise ReviewError(
                f"Bulk decisions of more than {BULK_UNDO_MAX} items are undone item by item, from each one's history."
            )
        if reviews[0].reviewer_id != actor.pk and not actor.has_role("curator"):
            raise ReviewError("Only the reviewer or a curator can undo this decision.")
        standing = {r.trajectory_id: r for r in reviews if r.standing}
        now = timezone.now()
        rows = (
            Trajectory.objects.select_for_update()
            .filter(pk__in=[r.trajectory_id for r in reviews])
            .annotate(held=~_free_for(actor))
            .values_list("pk", "version", "status", "violation_count", "judge_passed", "held")
        )
        outcome, undone = BulkUndoOutcome(0, 0, 0), []
        for pk, version, status, violation_count, judge_passed, held in rows:
            review = standing.get(pk)
            if review is None or review.trajectory_version != version:
                outcome.moved_on += 1
            elif held:
                outcome.held += 1
            else:
                restored = pipeline_status(violation_count=violation_count, judge_passed=judge_passed)
                undone.append((pk, version, status, restored))
        change = RollupChange([pk for pk, *_ in undone])
        for restored in {status for *_, status in undone}:
            Trajectory.objects.filter(pk__in=[pk for pk, *_, s in undone if s == restored]).update(
                status=restored, version=F("version") + 1, updated_at=now
            )
        TrajectoryChange.objects.bulk_create(
            TrajectoryChange(trajectory_id=pk, version=version + 1, action=Change.UNDO, actor=actor, detail="bulk")
            for pk, version, _, _ in undone
        )
        Review.objects.filter(pk__in=[standing[pk].pk for pk, *_ in undone]).update(undone_at=now, undone_by=actor)
        _audit_bulk(actor, "trajectory.undo", [(pk, previous, status) for pk, _, previous, status in undone])
        change.record()
        outcome.undone = len(undone)
    return outcome


def cluster_keep_one(*, head: int, keep: int, shown: list[int], reviewer, reason: str = "") -> BulkOutcome:
    """Keep one trajectory of a near-duplicate cluster and reject the rest, as one bulk decision (reviews_bulk: held
    items and items a person decided one by one are left as they are, and counted; the batch can be undone).

    `shown` are the members the person saw: only those still in the cluster are rejected, never one that joined
    it since, and none already rejected."""
    members = set(cluster_member_ids(head=head, among=[*shown, keep]))
    if keep not in members:
        raise ReviewError(f"Trajectory {keep} is not in this cluster (any more).", field="keep")
    rest = Trajectory.objects.filter(pk__in=members - {keep}).exclude(status=TrajectoryStatus.REJECTED)
    reason = (reason or "").strip() or f"near-duplicate of trajectory {keep}, which was kept"
    return reviews_bulk(trajectories=rest, reviewer=reviewer, decision=Decision.REJECT, reason=reason)


@transaction.atomic
def trajectories_assign(*, trajectories, assignee, actor) -> int:
    """Assign (or, with assignee None, unassign) every trajectory of a queryset."""
    ids = list(trajectories.values_list("pk", flat=True))
    Trajectory.objects.filter(pk__in=ids).update(assigned_to=assignee)
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor=actor,
            action="trajectory.assign",
            target_type=Trajectory._meta.label_lower,
            target_id=str(pk),
            data={"assignee": getattr(assignee, "username", None)},
        )
        for pk in ids
    )
    return len(ids)


# The job kind of curation.job_kinds.bulk_decision: a bulk decision over more items than a request should write.
BULK_JOB_KIND = "bulk-decision"


def reviews_bulk_queue(
    *,
    query: str = "",
    reviewer,
    decision: str,
    reason: str = "",
    selection: dict | None = None,
    audit: int | None = None,
) -> Job:
    """Queue a bulk decision over the queue that `query` (the queue page's filter parameters) selects, as a job: it
    decides the items in ranges of ids, each range as reviews_bulk would, with the filter as it stands then.

    `selection` ({"name": ..., and its parameters}) names the items through a selection another app registered
    (bulk_selection_register) instead of the queue's filter; `audit` names the audit every decision rests on."""
    reason = _bulk_reason(decision, reason)
    if selection is not None and selection.get("name") not in BULK_SELECTIONS:
        raise ReviewError(f"There is no bulk selection named {selection.get('name')!r}.", field="selection")
    params = {"query": query, "decision": decision, "reason": reason, "reviewer": reviewer.pk}
    if selection is not None:
        params["selection"] = selection
    if audit is not None:
        params["audit"] = audit
    return job_create(kind=BULK_JOB_KIND, params={**params, "batch": str(uuid.uuid4())}, actor=reviewer)


@dataclass(frozen=True)
class BulkSelection:
    """Items of a bulk decision named otherwise than by the queue's filter (an audit's frozen population): `bounds`
    gives the lowest and highest id (None: no items) and `trajectories` the items with ids in [low, high), each
    called with the selection's parameters."""

    bounds: Callable[[dict], tuple[int, int] | None]
    trajectories: Callable[[dict, int, int], QuerySet]


# Registered by the apps above curation, which it never imports: {name: selection}.
BULK_SELECTIONS: dict[str, BulkSelection] = {}


def bulk_selection_register(name: str, selection: BulkSelection) -> None:
    BULK_SELECTIONS[name] = selection


# ---------------------------------------------------------------- editor drafts


# A draft repeats the editor's form; the editor opens documents up to EDIT_MAX_BYTES, so twice that is plenty.
DRAFT_MAX_BYTES = 1024 * 1024


def draft_save(*, trajectory: Trajectory, author, based_on_version: int, fields: dict[str, list[str]]) -> EditorDraft:
    """Keep the editor's form as `author` left it (saved as they type), tied to the version they were editing."""
    if len(canonical_bytes(fields)) > DRAFT_MAX_BYTES:
        raise ReviewError(f"A draft holds at most {DRAFT_MAX_BYTES // 1024} KiB.", field="draft")
    draft, _ = EditorDraft.objects.update_or_create(
        trajectory=trajectory, author=author, defaults={"based_on_version": based_on_version, "fields": fields}
    )
    return draft


def draft_discard(*, trajectory_id: int, author) -> bool:
    return bool(EditorDraft.objects.filter(trajectory_id=trajectory_id, author=author).delete()[0])
