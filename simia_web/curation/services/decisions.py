"""Decisions: a person accepts, fixes and accepts, or rejects the version they saw, as its next version.

Where the reviewer stage is on (a workspace's or a domain's switch), an annotator's decision leaves the item awaiting
review: not accepted, not exported. A reviewer (or anyone ranking above) then decides it too, through the same path:
the same answer confirms the annotator's decision, a fix and accept of an acceptance fixes it, anything else
overturns it with the reviewer's reason. The reviewer's decision is the one that stands and counts."""

from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from simia_web.accounts.models import Role
from simia_web.accounts.scoping import has_role_in
from simia_web.catalog.guidelines import guidelines_in_force
from simia_web.catalog.models import Domain
from simia_web.core.services import audit_record
from simia_web.curation.gate import messages_written
from simia_web.curation.models import (
    STANDING,
    STATUS_FOR_DECISION,
    WAITING_FOR_REVIEWER,
    Change,
    Decision,
    EditorDraft,
    GoldItem,
    Review,
    ReviewStage,
    Trajectory,
    TrajectoryStatus,
)
from simia_web.curation.rollups import RollupChange
from simia_web.curation.versions import decision_supersede, trajectory_locked, version_advance, workspace_of

from .consensus import consensus_for, consensus_vote
from .edits import _status_audit, _text_write
from .holds import RELEASED, ReviewError, _hold_check
from .pipeline import conversation_summary

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
        gold = _gold_for(locked, reviewer)
        if gold is not None:
            answer = _gold_answer(
                locked, gold, reviewer=reviewer, decision=decision, reason=reason, seen=expected_version
            )
            change.record()
            return answer
        consensus = consensus_for(locked, reviewer)
        if consensus is not None:
            vote = consensus_vote(
                locked,
                consensus,
                voter=reviewer,
                decision=decision,
                reason=reason,
                seen=expected_version,
                domain_id=locked.domain_id,
            )
            change.record()
            trajectory.refresh_from_db()
            return vote
        previous = locked.status
        awaits, settles = _reviewer_stage(locked, reviewer)
        settled = _awaiting_settled(locked, decision, reason) if settles else None
        status = TrajectoryStatus.AWAITING_REVIEW if awaits else STATUS_FOR_DECISION[decision]
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
            stage=ReviewStage.AWAITING if awaits else ReviewStage.NONE,
            **(waiting_columns(locked, decision) if awaits else {}),
            **guidelines_in_force(domain_id=locked.domain_id).stamp,
        )
        if settled is not None:
            awaited, outcome = settled
            Review.objects.filter(pk=awaited.pk).update(
                stage=outcome, checked_by=reviewer, checked_at=review.created_at, check_reason=reason
            )
        _status_audit(actor=reviewer, trajectory=locked, previous=previous, reason=reason)
        EditorDraft.objects.filter(trajectory=locked, author=reviewer).delete()
        change.record()
    trajectory.refresh_from_db()
    return review


def waiting_columns(locked: Trajectory, decision: str) -> dict:
    """What the reviewer queue reads of a decision waiting for a reviewer, copied onto it: the trajectory's domain,
    and whether the decision goes against the judge's verdict (a rejection of a pass, an acceptance of a fail)."""
    passed = locked.judge_passed
    against = passed is not None and (decision == Decision.REJECT) == passed
    return {"domain_id": locked.domain_id, "against_judge": against}


def _gold_for(locked: Trajectory, person) -> GoldItem | None:
    """The gold item the trajectory is, when `person` answers it as one: below the curator role (curators decide a
    gold item as any other)."""
    gold = GoldItem.objects.filter(trajectory_id=locked.pk).first()
    if gold is None:
        return None
    return None if has_role_in(person, workspace_of(locked), Role.CURATOR) else gold


def _gold_answer(locked: Trajectory, gold: GoldItem, *, reviewer, decision: str, reason: str, seen: int) -> Review:
    """An annotator's answer on a gold item: kept as a Review (stage `gold`, never standing) with whether it was the
    expected one; the item stays as it was, only the answerer's hold goes."""
    Trajectory.objects.filter(pk=locked.pk, reserved_by=reviewer).update(**RELEASED)
    correct = (decision == Decision.REJECT) == (gold.expected_decision == Decision.REJECT)
    answer = Review.objects.create(
        trajectory=locked,
        reviewer=reviewer,
        decision=Decision.ACCEPT if decision == Decision.FIX_ACCEPT else decision,
        reason=reason,
        trajectory_version=locked.version,
        based_on_version=seen,
        stage=ReviewStage.GOLD,
        gold_correct=correct,
        domain_id=locked.domain_id,
        superseded_at=timezone.now(),
        **guidelines_in_force(domain_id=locked.domain_id).stamp,
    )
    audit_record(
        actor=reviewer, action="trajectory.gold_answer", target=locked, data={"decision": decision, "correct": correct}
    )
    return answer


def _reviewer_stage(locked: Trajectory, person) -> tuple[bool, bool]:
    """(whether `person`'s decision on the trajectory waits for a reviewer, whether it settles a decision that
    waits): the stage is on where the domain says so, or says nothing and its workspace does; it holds the
    decisions of people below the reviewer role, and people with that role or above settle them. Where the
    workspace asks a qualifying gold accuracy, the decisions of people below it wait even where the stage is off."""
    workspace_id, domain_stage, workspace_stage, accuracy, window = (
        Domain.objects.filter(pk=locked.domain_id)
        .values_list(
            "workspace_id",
            "review_stage",
            "workspace__review_stage",
            "workspace__qualify_accuracy",
            "workspace__qualify_window",
        )
        .get()
    )
    settles = has_role_in(person, workspace_id, Role.REVIEWER)
    if settles:
        return False, True
    stage_on = workspace_stage if domain_stage is None else domain_stage
    return bool(stage_on) or not qualified(person, workspace_id, accuracy, window), False


def qualified(person, workspace_id: int, accuracy: float | None, window: int) -> bool:
    """Whether `person` meets the workspace's qualifying gold accuracy (always, where it asks none): right on at least
    `accuracy` of their last `window` gold answers in the workspace (their first answer on each gold item), with
    `window` answers given."""
    if accuracy is None:
        return True
    firsts = (
        Review.objects.filter(reviewer=person, stage=ReviewStage.GOLD, trajectory__domain__workspace_id=workspace_id)
        .order_by()
        .values("trajectory_id")
        .annotate(first=Min("id"))
        .values("first")
    )
    latest = list(
        Review.objects.filter(pk__in=firsts).order_by("-id").values_list("gold_correct", flat=True)[: max(window, 1)]
    )
    return len(latest) >= window and sum(1 for ok in latest if ok) >= accuracy * len(latest)


def settled_as(awaited: str, decision: str) -> str:
    """How a reviewer's `decision` settles an awaiting decision `awaited`: the same answer confirms it (accepting
    confirms a fix and accept too), fix and accept of an acceptance fixes it, anything else overturns it."""
    if (awaited == Decision.REJECT) != (decision == Decision.REJECT):
        return ReviewStage.OVERTURNED
    return ReviewStage.FIXED if decision == Decision.FIX_ACCEPT else ReviewStage.CONFIRMED


def _awaiting_settled(locked: Trajectory, decision: str, reason: str) -> tuple[Review, str] | None:
    """The decision awaiting review on the trajectory and how `decision` settles it, or None when none awaits; an
    overturn without a reason is refused."""
    awaited = Review.objects.filter(STANDING, trajectory=locked, stage__in=WAITING_FOR_REVIEWER).first()
    if awaited is None:
        return None
    if awaited.stage == ReviewStage.DISPUTED:  # the votes disagree: any decision of the reviewer's settles them
        return awaited, ReviewStage.ADJUDICATED
    outcome = settled_as(awaited.decision, decision)
    if outcome == ReviewStage.OVERTURNED and not reason:
        raise ReviewError("Overturning a decision needs a reason: the annotator reads it.", field="reason")
    return awaited, outcome
