"""The reviewer stage's reads: the reviewer queue (annotators' decisions awaiting review, those most in need of a
second look first), the next item in it, and an annotator's overturned decisions with the reasons."""

from collections.abc import Iterable

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import STANDING, Decision, Review, ReviewStage

# A decision against the judge's verdict needs the second look most.
AGAINST_JUDGE = Q(decision=Decision.REJECT, trajectory__judge_passed=True) | Q(
    ~Q(decision=Decision.REJECT), trajectory__judge_passed=False
)


def awaiting_review(*, workspace_ids: Iterable[int]) -> QuerySet[Review]:
    """The decisions awaiting review in the workspaces, in the reviewer queue's order: against the judge first, then
    the oldest (the partial index `review_awaiting` holds them; a few rows however large the workspace)."""
    reviews = scoped(Review.objects.filter(STANDING, stage=ReviewStage.AWAITING), workspace_ids)
    return (
        reviews.annotate(
            against_judge=Case(When(AGAINST_JUDGE, then=Value(0)), default=Value(1), output_field=IntegerField())
        )
        .select_related("reviewer", "trajectory", "trajectory__domain")
        .order_by("against_judge", "created_at", "id")
    )


def awaiting_next(*, workspace_ids: Iterable[int], user, after_id: int | None = None) -> int | None:
    """The trajectory of the first decision awaiting review that `user` may take now (nobody else holds it), other
    than the trajectory `after_id`: where a reviewer goes after settling one."""
    free = (
        Q(trajectory__reserved_by__isnull=True)
        | Q(trajectory__reserved_until__lt=timezone.now())
        | Q(trajectory__reserved_by=user)
    )
    queue = awaiting_review(workspace_ids=workspace_ids).filter(free)
    if after_id is not None:
        queue = queue.exclude(trajectory_id=after_id)
    return queue.values_list("trajectory_id", flat=True).first()


def overturned_for(*, user, workspace_ids: Iterable[int]) -> QuerySet[Review]:
    """`user`'s decisions a reviewer overturned, latest first, with who and why."""
    reviews = scoped(Review.objects.filter(reviewer=user, stage=ReviewStage.OVERTURNED), workspace_ids)
    return reviews.select_related("checked_by", "trajectory", "trajectory__domain").order_by("-checked_at", "-id")
