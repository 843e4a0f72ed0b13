"""The reviewer stage's reads: the reviewer queue (annotators' decisions awaiting review, those most in need of a
second look first), the next item in it, and an annotator's overturned decisions with the reasons."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Case, Count, IntegerField, Max, Q, QuerySet, Value, When
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import SETTLED_ONE_BY_ONE, STANDING, Decision, Figure, Review, ReviewStage

from .queue import ROW_UNSHOWN
from .rollups import rollup_counts, rollup_rows

# A decision against the judge's verdict needs the second look most.
AGAINST_JUDGE = Q(decision=Decision.REJECT, trajectory__judge_passed=True) | Q(
    ~Q(decision=Decision.REJECT), trajectory__judge_passed=False
)


# An annotator whose decisions reviewers overturn this often (or more), once SETTLED_ENOUGH of them were settled,
# has their decisions looked at before those of annotators reviewers agree with.
OVERTURN_RATE_HIGH = 0.2
SETTLED_ENOUGH = 5


def overturn_rates(*, workspace_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """{annotator id: (their decisions overturned, their decisions settled)} in the workspaces, from the rollups
    (Figure.SECOND_LOOK): a few rows per annotator, whatever the number of decisions."""
    rates: dict[int, tuple[int, int]] = {}
    rows = rollup_counts(rollup_rows(Figure.SECOND_LOOK, workspace_ids=workspace_ids), "reviewer", "label")
    for annotator, stage, count in rows:
        overturned, settled = rates.get(annotator, (0, 0))
        rates[annotator] = (overturned + (count if stage == ReviewStage.OVERTURNED else 0), settled + count)
    return rates


def _rate(counts: tuple[int, int] | None) -> float | None:
    return counts[0] / counts[1] if counts and counts[1] else None


def awaiting_review(*, workspace_ids: Iterable[int]) -> QuerySet[Review]:
    """The decisions awaiting review in the workspaces, in the reviewer queue's order: decisions against the judge
    first; then those of annotators whom reviewers overturn often, of annotators with too few settled decisions to
    say, and of the rest; the oldest first within each (the partial index `review_awaiting` holds them)."""
    workspace_ids = list(workspace_ids)
    rates = overturn_rates(workspace_ids=workspace_ids)
    often = [
        a
        for a, (overturned, settled) in rates.items()
        if settled >= SETTLED_ENOUGH and overturned >= OVERTURN_RATE_HIGH * settled
    ]
    known = [a for a, (_, settled) in rates.items() if settled >= SETTLED_ENOUGH]
    reviews = scoped(Review.objects.filter(STANDING, stage=ReviewStage.AWAITING), workspace_ids)
    return (
        reviews.annotate(
            against_judge=Case(When(AGAINST_JUDGE, then=Value(0)), default=Value(1), output_field=IntegerField()),
            annotator_tier=Case(
                When(reviewer_id__in=often, then=Value(0)),
                When(~Q(reviewer_id__in=known), then=Value(1)),
                default=Value(2),
                output_field=IntegerField(),
            ),
        )
        .select_related("reviewer", "trajectory", "trajectory__domain")
        .defer(*(f"trajectory__{column}" for column in ROW_UNSHOWN))
        .order_by("against_judge", "annotator_tier", "created_at", "id")
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


@dataclass
class AnnotatorBatch:
    """One annotator's batch: their decisions since the last bulk confirmation of theirs (`since`, None before the
    first), of which `awaiting` still await review, and the sample a bulk confirmation of the rest would rest on:
    those reviewers settled one by one (`sample`, the ids of the latest SAMPLE_MAX), `overturned` of them
    overturned."""

    annotator_id: int
    username: str
    awaiting: int
    since: datetime | None
    sample: list[int]
    overturned: int
    overturn_rate: float | None = None  # of all their decisions reviewers settled (None: none yet)


# The reviewer queue lists this many annotators' batches, most awaiting first; a sample names at most SAMPLE_MAX.
BATCHES_SHOWN = 50
SAMPLE_MAX = 200


def awaiting_batches(*, workspace_ids: Iterable[int]) -> list[AnnotatorBatch]:
    """Each annotator's batch awaiting review in the workspaces, most awaiting first: three grouped queries
    (the counts read the partial index `review_awaiting`)."""
    workspace_ids = list(workspace_ids)
    awaiting = scoped(Review.objects.filter(STANDING, stage=ReviewStage.AWAITING), workspace_ids)
    counts = list(
        awaiting.order_by()
        .values("reviewer_id", "reviewer__username")
        .annotate(n=Count("id"))
        .order_by("-n", "reviewer__username")[:BATCHES_SHOWN]
    )
    if not counts:
        return []
    annotators = [row["reviewer_id"] for row in counts]
    mine = scoped(Review.objects.filter(reviewer_id__in=annotators), workspace_ids)
    last_bulk = dict(
        mine.filter(stage=ReviewStage.BULK)
        .order_by()
        .values("reviewer_id")
        .annotate(last=Max("created_at"))
        .values_list("reviewer_id", "last")
    )
    samples: dict[int, list[tuple[int, str]]] = {}
    for pk, annotator, stage in _latest_settled(mine, annotators, last_bulk):
        samples.setdefault(annotator, []).append((pk, stage))
    rates = overturn_rates(workspace_ids=workspace_ids)
    return [
        AnnotatorBatch(
            annotator_id=row["reviewer_id"],
            username=row["reviewer__username"],
            awaiting=row["n"],
            since=last_bulk.get(row["reviewer_id"]),
            sample=sorted(pk for pk, _ in samples.get(row["reviewer_id"], [])),
            overturned=sum(1 for _, stage in samples.get(row["reviewer_id"], []) if stage == ReviewStage.OVERTURNED),
            overturn_rate=_rate(rates.get(row["reviewer_id"])),
        )
        for row in counts
    ]


def _latest_settled(mine: QuerySet[Review], annotators: list[int], last_bulk: dict) -> list[tuple[int, int, str]]:
    """(id, annotator, stage) of each annotator's latest SAMPLE_MAX decisions settled one by one since their last
    bulk confirmation: one statement of a bounded read per annotator (the partial index `review_settled`) where the
    database takes limits inside a union, else a statement each."""
    reads = []
    for annotator in annotators:
        after = {"created_at__gt": last_bulk[annotator]} if annotator in last_bulk else {}
        theirs = mine.filter(reviewer_id=annotator, stage__in=SETTLED_ONE_BY_ONE, **after).order_by("-id")
        reads.append(theirs.values_list("pk", "reviewer_id", "stage")[:SAMPLE_MAX])
    if connection.features.supports_slicing_ordering_in_compound:
        return list(reads[0].union(*reads[1:], all=True)) if reads else []
    return [row for read in reads for row in read]


def overturned_for(*, user, workspace_ids: Iterable[int]) -> QuerySet[Review]:
    """`user`'s decisions a reviewer overturned, latest first, with who and why."""
    reviews = scoped(Review.objects.filter(reviewer=user, stage=ReviewStage.OVERTURNED), workspace_ids)
    return reviews.select_related("checked_by", "trajectory", "trajectory__domain").order_by("-checked_at", "-id")
