"""The reviewer stage's reads: the reviewer queue (annotators' decisions awaiting review and items whose votes
disagree, those most in need of a second look first), the next item in it, and an annotator's overturned decisions
with the reasons."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Case, Count, IntegerField, Prefetch, Q, QuerySet, Value, When
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import (
    SETTLED_ONE_BY_ONE,
    STANDING,
    WAITING_FOR_REVIEWER,
    Figure,
    Review,
    ReviewStage,
    Trajectory,
)

from .queue import ROW_UNSHOWN
from .rollups import rollup_counts, rollup_rows

# An annotator whose decisions reviewers overturn this often (or more), once SETTLED_ENOUGH of them were settled, or
# who is right on fewer than GOLD_ACCURACY_LOW of their answers on gold items, once SETTLED_ENOUGH were given, has
# their decisions looked at before those of annotators reviewers agree with.
OVERTURN_RATE_HIGH = 0.2
GOLD_ACCURACY_LOW = 0.8
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


def annotator_tiers(workspace_ids: list[int]) -> tuple[list[int], list[int]]:
    """(the annotators whose decisions need a second look first: often overturned or often wrong on gold items,
    the annotators known well enough to say either way) in the workspaces."""
    rates = overturn_rates(workspace_ids=workspace_ids)
    gold = (
        scoped(Review.objects.filter(stage=ReviewStage.GOLD), workspace_ids, domain_column="domain_id")
        .order_by()
        .values_list("reviewer_id")
        .annotate(n=Count("id"), right=Count("id", filter=Q(gold_correct=True)))
    )
    often = {
        a
        for a, (overturned, settled) in rates.items()
        if settled >= SETTLED_ENOUGH and overturned >= OVERTURN_RATE_HIGH * settled
    }
    known = {a for a, (_, settled) in rates.items() if settled >= SETTLED_ENOUGH}
    for annotator, answered, right in gold:
        if answered >= SETTLED_ENOUGH:
            known.add(annotator)
            if right < GOLD_ACCURACY_LOW * answered:
                often.add(annotator)
    return sorted(often), sorted(known)


def waiting_for_reviewer(workspace_ids: list[int], stages=WAITING_FOR_REVIEWER) -> QuerySet[Review]:
    """The standing decisions of `stages` waiting for a reviewer in the workspaces, read through the partial index
    `review_waiting` by the domain they carry (review_decide copies it onto them), without joining the trajectories."""
    waiting = Review.objects.filter(STANDING, stage__in=stages)
    return scoped(waiting, workspace_ids, domain_column="domain_id")


def awaiting_review(*, workspace_ids: Iterable[int]) -> QuerySet[Review]:
    """The decisions waiting for a reviewer in the workspaces, in the reviewer queue's order: those that disagree
    (with the judge, or annotators' votes with one another) first; then those of annotators whom reviewers overturn
    often or who are often wrong on gold items, of annotators too little known to say, and of the rest; the oldest
    first within each. Every key is a column of the partial index `review_waiting`: the backlog is sorted from the
    index alone (`awaiting_page` reads a page's rows after)."""
    workspace_ids = list(workspace_ids)
    often, known = annotator_tiers(workspace_ids)
    return (
        waiting_for_reviewer(workspace_ids)
        .annotate(
            contested=Case(
                When(Q(against_judge=True) | Q(stage=ReviewStage.DISPUTED), then=Value(0)),
                default=Value(1),
                output_field=IntegerField(),
            ),
            annotator_tier=Case(
                When(reviewer_id__in=often, then=Value(0)),
                When(~Q(reviewer_id__in=known), then=Value(1)),
                default=Value(2),
                output_field=IntegerField(),
            ),
        )
        .order_by("contested", "annotator_tier", "created_at", "id")
    )


def awaiting_page(queue: QuerySet[Review], size: int) -> list[Review]:
    """The first `size` decisions of the reviewer queue `queue` with their annotators and trajectories: the page's
    ids first, sorted from the index alone, then those rows only."""
    ids = list(queue.values_list("pk", flat=True)[:size])
    rows = (
        Review.objects.select_related("reviewer")
        .prefetch_related(Prefetch("trajectory", Trajectory.objects.defer(*ROW_UNSHOWN).select_related("domain")))
        .in_bulk(ids)
    )
    return [rows[pk] for pk in ids]


def awaiting_next(*, workspace_ids: Iterable[int], user, after_id: int | None = None) -> int | None:
    """The trajectory of the first decision awaiting review that `user` may take now (nobody else holds it), other
    than the trajectory `after_id`: where a reviewer goes after settling one."""
    held = Trajectory.objects.filter(reserved_until__gte=timezone.now()).exclude(reserved_by=user)
    queue = awaiting_review(workspace_ids=workspace_ids).exclude(trajectory_id__in=held.values("pk"))
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
    (the counts read the partial index `review_waiting`)."""
    workspace_ids = list(workspace_ids)
    awaiting = waiting_for_reviewer(workspace_ids, stages=[ReviewStage.AWAITING])
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
    bulk = mine.filter(stage=ReviewStage.BULK).order_by("-created_at")
    last_bulk = dict(
        _each_read([bulk.filter(reviewer_id=a).values_list("reviewer_id", "created_at")[:1] for a in annotators])
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
    bulk confirmation, a bounded read each (the partial index `review_settled`)."""
    reads = []
    for annotator in annotators:
        after = {"created_at__gt": last_bulk[annotator]} if annotator in last_bulk else {}
        theirs = mine.filter(reviewer_id=annotator, stage__in=SETTLED_ONE_BY_ONE, **after).order_by("-id")
        reads.append(theirs.values_list("pk", "reviewer_id", "stage")[:SAMPLE_MAX])
    return _each_read(reads)


def _each_read(reads: list[QuerySet]) -> list[tuple]:
    """The rows of bounded reads, one per annotator: one statement where the database takes limits inside a union
    (each read stops at its own limit in its index), else a statement each."""
    if len(reads) > 1 and connection.features.supports_slicing_ordering_in_compound:
        return list(reads[0].union(*reads[1:], all=True).order_by())
    return [row for read in reads for row in read]


def overturned_for(*, user, workspace_ids: Iterable[int]) -> QuerySet[Review]:
    """`user`'s decisions a reviewer overturned, latest first, with who and why."""
    reviews = scoped(Review.objects.filter(reviewer=user, stage=ReviewStage.OVERTURNED), workspace_ids)
    return reviews.select_related("checked_by", "trajectory", "trajectory__domain").order_by("-checked_at", "-id")
