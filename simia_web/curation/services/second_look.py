"""The reviewer stage's bulk write: a reviewer who has settled a sample of an annotator's decisions one by one
confirms the rest of that annotator's batch at once, naming the sample it rests on. Each item is confirmed at its
current version as its next version, as a bulk decision that reviews_bulk_undo takes back."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.catalog.guidelines import guidelines_stamps
from simia_web.curation.models import (
    SETTLED_ONE_BY_ONE,
    STANDING,
    Decision,
    Review,
    ReviewStage,
    Trajectory,
    TrajectoryChange,
)
from simia_web.curation.rollups import RollupChange
from simia_web.curation.selectors.trajectory import free_for

from .bulk import audit_bulk
from .decisions import STATUS_FOR_DECISION
from .holds import RELEASED, ReviewError

# A bulk confirmation writes at most this many items in its request; a larger batch is confirmed in several.
CONFIRM_REST_MAX = 1_000


def _answer(decision: str) -> str:
    """The status a confirmation gives: a fix and accept was accepted (its text is already the item's)."""
    return Decision.REJECT if decision == Decision.REJECT else Decision.ACCEPT


@dataclass
class ConfirmRestOutcome:
    confirmed: int
    held: int  # someone else is working on them right now
    batch: uuid.UUID | None = None  # names the bulk decision for its undo


def reviews_confirm_rest(
    *, annotator_id: int, reviewer, sample: Iterable[int], workspace_ids: Iterable[int]
) -> ConfirmRestOutcome:
    """Confirm every decision of the annotator `annotator_id` still awaiting review in the workspaces, resting on
    `sample`: ids of that annotator's decisions reviewers settled one by one (at least one, every one checked).

    Each item takes the annotator's answer (a fix and accept is accepted as fixed) as its next version, through a
    bulk Review of the reviewer's that names the sample; the annotator's decision is marked confirmed in bulk.
    Items someone else holds are left and counted."""
    workspace_ids = list(workspace_ids)
    sample_ids = sorted({int(pk) for pk in sample})
    with transaction.atomic():
        found = scoped(
            Review.objects.filter(pk__in=sample_ids, reviewer_id=annotator_id, stage__in=SETTLED_ONE_BY_ONE),
            workspace_ids,
        ).count()
        if not sample_ids or found != len(sample_ids):
            raise ReviewError(
                "A bulk confirmation rests on a sample: settle some of this annotator's decisions one by one first.",
                field="sample",
            )
        awaiting = scoped(
            Review.objects.filter(STANDING, stage=ReviewStage.AWAITING, reviewer_id=annotator_id), workspace_ids
        )
        rows = list(
            Trajectory.objects.filter(pk__in=awaiting.values("trajectory_id"))
            .select_for_update()
            .annotate(held=~free_for(reviewer))
            .order_by("pk")
            .values_list("pk", "version", "status", "domain_id", "held")[:CONFIRM_REST_MAX]
        )
        outcome = ConfirmRestOutcome(0, sum(1 for *_, held in rows if held))
        rows = [row for row in rows if not row[-1]]
        if not rows:
            return outcome
        waiting = Review.objects.filter(STANDING, stage=ReviewStage.AWAITING, trajectory_id__in=[r[0] for r in rows])
        decisions = {r.trajectory_id: r for r in waiting}
        rows = [row for row in rows if row[0] in decisions]  # (every one: the items are locked)
        ids = [pk for pk, *_ in rows]
        change = RollupChange(ids)
        now, batch = timezone.now(), uuid.uuid4()
        answer = {pk: _answer(r.decision) for pk, r in decisions.items()}
        for decision in set(answer.values()):
            Trajectory.objects.filter(pk__in=[pk for pk in ids if answer.get(pk) == decision]).update(
                status=STATUS_FOR_DECISION[decision], version=F("version") + 1, updated_at=now, **RELEASED
            )
        detail = f"confirmed in bulk on a sample of {len(sample_ids)}"
        TrajectoryChange.objects.bulk_create(
            TrajectoryChange(trajectory_id=pk, version=version + 1, action=answer[pk], actor=reviewer, detail=detail)
            for pk, version, *_ in rows
        )
        Review.objects.filter(pk__in=[r.pk for r in decisions.values()]).update(
            stage=ReviewStage.BULK, checked_by=reviewer, checked_at=now, superseded_at=now, superseded_by=reviewer
        )
        stamps = guidelines_stamps(domain_ids={domain for _, _, _, domain, _ in rows})
        Review.objects.bulk_create(
            Review(
                trajectory_id=pk,
                reviewer=reviewer,
                decision=answer[pk],
                reason=decisions[pk].reason,
                trajectory_version=version + 1,
                based_on_version=version,
                bulk=True,
                batch=batch,
                sample=sample_ids,
                **stamps[domain],
            )
            for pk, version, _, domain, _ in rows
        )
        changes = [(pk, previous, STATUS_FOR_DECISION[answer[pk]]) for pk, _, previous, _, _ in rows]
        audit_bulk(reviewer, "trajectory.status", changes, sample=sample_ids, confirmed_rest_of=annotator_id)
        change.record()
    outcome.confirmed, outcome.batch = len(rows), batch
    return outcome
