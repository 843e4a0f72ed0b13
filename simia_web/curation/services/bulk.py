"""Bulk actions: accept or reject many trajectories at once (within the request or as a job), take such a
decision back, keep one of a near-duplicate cluster, assign; and the selections other apps register for them."""

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, F, OuterRef, QuerySet
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.catalog.guidelines import guidelines_stamps
from simia_web.core.models import AuditEvent
from simia_web.curation.duplicates import cluster_member_ids
from simia_web.curation.models import (
    STANDING,
    Change,
    Decision,
    Review,
    Trajectory,
    TrajectoryChange,
    TrajectoryStatus,
    pipeline_status,
)
from simia_web.curation.rollups import RollupChange
from simia_web.curation.selectors.bulk import BulkOutcome, bulk_split
from simia_web.curation.selectors.trajectory import free_for
from simia_web.curation.signals import trajectory_statuses_changed
from simia_web.jobs.models import ACTIVE_JOB_STATUSES, Job
from simia_web.jobs.services import job_create

from .decisions import STATUS_FOR_DECISION
from .holds import RELEASED, ReviewError


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
    outcome, rows = bulk_split(trajectories, reviewer, decision, lock=True)
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
    domains = dict(Trajectory.objects.filter(pk__in=ids).values_list("pk", "domain_id"))
    stamps = guidelines_stamps(domain_ids=set(domains.values()))
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
            **stamps[domains[pk]],
        )
        for pk, version, _ in rows
    )
    evidence = {"audit": audit} if audit is not None else {}
    changes = [(pk, previous, status) for pk, _, previous in rows]
    audit_bulk(reviewer, "trajectory.status", changes, reason=reason, **evidence)
    change.record()
    return outcome


def _workspaces_of(ids: list[int]) -> dict[int, int]:
    """{trajectory id: its workspace id}, for the audit events of a bulk write (one query)."""
    return dict(Trajectory.objects.filter(pk__in=ids).values_list("pk", "domain__workspace_id"))


def audit_bulk(actor, action: str, changes: list[tuple[int, str, str]], **data) -> None:
    workspaces = _workspaces_of([pk for pk, _, _ in changes])
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor=actor,
            action=action,
            target_type=Trajectory._meta.label_lower,
            target_id=str(pk),
            data={"from": previous, "to": status, "bulk": True, **data},
            workspace_id=workspaces.get(pk),
        )
        for pk, previous, status in changes
    )
    trajectory_statuses_changed.send(sender=Trajectory, trajectory_ids=[pk for pk, _, _ in changes])


# A bulk decision this large is undone within the request; a larger one by a job of ranges (reviews_bulk_undo_queue).
BULK_UNDO_MAX = 50
# The job kind of curation.job_kinds.bulk_undo.
BULK_UNDO_JOB_KIND = "bulk-undo"


class BulkUndoTooLarge(ReviewError):
    """A bulk decision of more items than a request undoes: reviews_bulk_undo_queue undoes it."""


@dataclass
class BulkUndoOutcome:
    undone: int
    moved_on: int  # changed since the bulk decision (decided again, edited, reverted, undone): left as they are
    held: int  # someone else is reviewing them right now


def _batch_reviews(batch: uuid.UUID, workspace_ids: Iterable[int]):
    """The reviews a bulk decision made in the workspaces `workspace_ids` (another workspace's is no such one)."""
    return scoped(Review.objects.filter(batch=batch), workspace_ids)


def _undo_allowed(review: Review, actor) -> None:
    if review.reviewer_id != actor.pk and not actor.has_role("curator"):
        raise ReviewError("Only the reviewer or a curator can undo this decision.")


def reviews_bulk_undo(*, batch: uuid.UUID, actor, workspace_ids: Iterable[int]) -> BulkUndoOutcome:
    """Take back a bulk decision of up to BULK_UNDO_MAX items made in the workspaces `workspace_ids` (a larger one:
    reviews_bulk_undo_queue): each item still at the version the bulk decision made, and not held by someone else,
    waits for a decision again (as its next version)."""
    with transaction.atomic():
        made = _batch_reviews(batch, workspace_ids)
        reviews = list(Review.objects.filter(pk__in=made.values("pk")).select_for_update()[: BULK_UNDO_MAX + 1])
        if not reviews:
            raise ReviewError("There is no such bulk decision.", field="batch")
        if len(reviews) > BULK_UNDO_MAX:
            raise BulkUndoTooLarge(f"Bulk decisions of more than {BULK_UNDO_MAX} items are undone by a job.")
        _undo_allowed(reviews[0], actor)
        return _reviews_undone(reviews, actor)


def reviews_bulk_undo_range(*, batch: uuid.UUID, actor, low: int, high: int) -> BulkUndoOutcome:
    """reviews_bulk_undo of the bulk decision's items with ids in [low, high), whatever their number: a unit of the
    undo job, which checked who may undo it when it was queued."""
    with transaction.atomic():
        made = Review.objects.filter(batch=batch, trajectory_id__gte=low, trajectory_id__lt=high)
        return _reviews_undone(list(made.select_for_update()), actor)


def _reviews_undone(reviews: list[Review], actor) -> BulkUndoOutcome:
    """Undo the bulk decision's `reviews` (locked): each item still at the version its review made, and not held by
    someone else, waits for a decision again as its next version; the rest are counted."""
    standing = {r.trajectory_id: r for r in reviews if r.standing}
    now = timezone.now()
    rows = (
        Trajectory.objects.select_for_update()
        .filter(pk__in=[r.trajectory_id for r in reviews])
        .annotate(held=~free_for(actor))
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
    audit_bulk(actor, "trajectory.undo", [(pk, previous, status) for pk, _, previous, status in undone])
    change.record()
    outcome.undone = len(undone)
    return outcome


def reviews_bulk_undo_queue(*, batch: uuid.UUID, actor, workspace_ids: Iterable[int]) -> Job:
    """Queue the undo of a bulk decision of any size made in the workspaces `workspace_ids`, as a job of its
    workspace: ranges of its items that any worker takes, each undone as reviews_bulk_undo undoes one (items changed
    since, or held by someone else, are left and counted). Refused while another undo of it runs."""
    first = _batch_reviews(batch, workspace_ids).select_related("trajectory__domain").order_by("pk").first()
    if first is None:
        raise ReviewError("There is no such bulk decision.", field="batch")
    _undo_allowed(first, actor)
    undoing = Job.objects.filter(kind=BULK_UNDO_JOB_KIND, params__batch=str(batch), status__in=ACTIVE_JOB_STATUSES)
    running = undoing.first()
    if running is not None:
        raise ReviewError(f"Job {running.pk} is undoing this bulk decision already.")
    return job_create(
        kind=BULK_UNDO_JOB_KIND,
        params={"batch": str(batch), "actor": actor.pk},
        actor=actor,
        workspace_id=first.trajectory.domain.workspace_id,
    )


@dataclass
class SendBackOutcome:
    sent_back: int
    held: int  # someone else is reviewing them right now
    undecided: int  # no decision stands on them


@transaction.atomic
def reviews_send_back(*, trajectories, actor, reason: str = "") -> SendBackOutcome:
    """Send every decided trajectory of a queryset back for review (after its guidelines changed): the decision
    standing on it ends, and it waits for a decision again, as its next version (its text stays). Items someone
    else holds, and items no decision stands on, are left as they are and counted."""
    reason = (reason or "").strip() or "sent back for review"
    standing = Review.objects.filter(STANDING, trajectory=OuterRef("pk"))
    rows = (
        Trajectory.objects.filter(pk__in=trajectories.values("pk"))
        .select_for_update()
        .annotate(held=~free_for(actor), decided=Exists(standing))
        .values_list("pk", "version", "status", "violation_count", "judge_passed", "held", "decided")
    )
    outcome, sent = SendBackOutcome(0, 0, 0), []
    for pk, version, status, violation_count, judge_passed, held, decided in rows:
        if not decided:
            outcome.undecided += 1
        elif held:
            outcome.held += 1
        else:
            sent.append(
                (pk, version, status, pipeline_status(violation_count=violation_count, judge_passed=judge_passed))
            )
    if not sent:
        return outcome
    ids = [pk for pk, *_ in sent]
    change = RollupChange(ids)
    now = timezone.now()
    Review.objects.filter(STANDING, trajectory_id__in=ids).update(superseded_at=now, superseded_by=actor)
    for restored in {status for *_, status in sent}:
        Trajectory.objects.filter(pk__in=[pk for pk, *_, s in sent if s == restored]).update(
            status=restored, version=F("version") + 1, updated_at=now
        )
    TrajectoryChange.objects.bulk_create(
        TrajectoryChange(
            trajectory_id=pk, version=version + 1, action=Change.SEND_BACK, actor=actor, detail=reason[:200]
        )
        for pk, version, _, _ in sent
    )
    audit_bulk(
        actor, "trajectory.send_back", [(pk, previous, status) for pk, _, previous, status in sent], reason=reason
    )
    change.record()
    outcome.sent_back = len(sent)
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
    workspaces = _workspaces_of(ids)
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor=actor,
            action="trajectory.assign",
            target_type=Trajectory._meta.label_lower,
            target_id=str(pk),
            data={"assignee": getattr(assignee, "username", None)},
            workspace_id=workspaces.get(pk),
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
    workspace_id: int | None = None,
) -> Job:
    """Queue a bulk decision over the queue of the workspace `workspace_id` (the `default` one when None) that
    `query` (the queue page's filter parameters) selects, as a job of that workspace: it decides the items in ranges
    of ids, each range as reviews_bulk would, with the filter as it stands then, never an item of another workspace.

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
    return job_create(
        kind=BULK_JOB_KIND, params={**params, "batch": str(uuid.uuid4())}, actor=reviewer, workspace_id=workspace_id
    )


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
