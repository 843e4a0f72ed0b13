"""An annotator's quality in a workspace: accuracy on gold items (their first answer on each) with a 95% Wilson
interval and its trend over their answers, agreement with reviewers (how often reviewers overturn them, from the
rollups), and agreement with other annotators who answered the same item versions (gold answers and consensus
votes)."""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Case, Count, Exists, F, Func, IntegerField, Min, OuterRef, Q, QuerySet, Subquery, Sum, When
from django.db.models.functions import Coalesce, Sign

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import PEER_STAGES, Decision, Review, ReviewStage

from .second_look import overturn_rates

Z95 = 1.959964
# The trend is the accuracy of consecutive blocks of this many answers, over the latest TREND_ANSWERS answers.
TREND_BLOCK = 10
TREND_ANSWERS = 200
# A vote its author replaced with another (a changed mind) is no answer of theirs any more.
PEER_ANSWER = Q(stage__in=PEER_STAGES) & (Q(undone_at__isnull=True) | ~Q(undone_by_id=F("reviewer_id")))


def wilson(correct: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a share `correct` / `n` (None for no answers)."""
    if n == 0:
        return None
    p = correct / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Quality:
    gold_answered: int
    gold_correct: int
    interval: tuple[float, float] | None
    trend: list[float] = field(default_factory=list)  # accuracy per block of TREND_BLOCK answers, oldest first
    overturned: int = 0
    settled: int = 0
    # Agreement with other annotators: the item versions the annotator and someone else answered, the pairs of
    # answers (theirs, another's) on them, and the pairs that agree (both reject, or neither).
    peer_items: int = 0
    peer_pairs: int = 0
    peer_agreed: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.gold_correct / self.gold_answered if self.gold_answered else None

    @property
    def overturn_rate(self) -> float | None:
        return self.overturned / self.settled if self.settled else None

    @property
    def peer_agreement(self) -> float | None:
        return self.peer_agreed / self.peer_pairs if self.peer_pairs else None

    @property
    def peer_interval(self) -> tuple[float, float] | None:
        return wilson(self.peer_agreed, self.peer_pairs)

    def as_dict(self) -> dict:
        return {
            "gold": {
                "answered": self.gold_answered,
                "correct": self.gold_correct,
                "accuracy": self.accuracy,
                "interval95": list(self.interval) if self.interval else None,
                "trend": self.trend,
                "trend_block": TREND_BLOCK,
            },
            "reviewers": {"settled": self.settled, "overturned": self.overturned, "overturn_rate": self.overturn_rate},
            "annotators": {
                "items": self.peer_items,
                "pairs": self.peer_pairs,
                "agreed": self.peer_agreed,
                "agreement": self.peer_agreement,
                "interval95": list(self.peer_interval) if self.peer_interval else None,
            },
        }


def annotator_quality(*, annotator_id: int, workspace_ids: Iterable[int]) -> Quality:
    """The annotator's quality over the workspaces: their first answer on each gold item counts."""
    workspace_ids = list(workspace_ids)
    answers = scoped(Review.objects.filter(reviewer_id=annotator_id, stage=ReviewStage.GOLD), workspace_ids)
    firsts = answers.order_by().values("trajectory_id").annotate(first=Min("id")).values("first")
    counted = Review.objects.filter(pk__in=firsts)
    totals = counted.aggregate(n=Count("id"), correct=Count("id", filter=Q(gold_correct=True)))
    latest = list(counted.order_by("-id").values_list("gold_correct", flat=True)[:TREND_ANSWERS])[::-1]
    trend = [
        sum(1 for ok in latest[i : i + TREND_BLOCK] if ok) / len(latest[i : i + TREND_BLOCK])
        for i in range(0, len(latest), TREND_BLOCK)
    ]
    overturned, settled = overturn_rates(workspace_ids=workspace_ids).get(annotator_id, (0, 0))
    peers = peer_agreement(annotator_id=annotator_id, workspace_ids=workspace_ids)
    return Quality(
        gold_answered=totals["n"],
        gold_correct=totals["correct"],
        interval=wilson(totals["correct"], totals["n"]),
        trend=trend,
        overturned=overturned,
        settled=settled,
        peer_items=peers["items"],
        peer_pairs=peers["pairs"],
        peer_agreed=peers["agreed"],
    )


def _first_answers(answers: QuerySet[Review]) -> QuerySet[Review]:
    """Of `answers`, each person's first on each item version (no earlier answer of theirs on it)."""
    earlier = Review.objects.filter(
        PEER_ANSWER,
        reviewer_id=OuterRef("reviewer_id"),
        trajectory_id=OuterRef("trajectory_id"),
        based_on_version=OuterRef("based_on_version"),
        id__lt=OuterRef("id"),
    )
    return answers.filter(PEER_ANSWER).exclude(Exists(earlier))


def _count(rows: QuerySet[Review]) -> Coalesce:
    return Coalesce(Subquery(rows.order_by().annotate(n=Func(F("id"), function="COUNT")).values("n")), 0)


def peer_agreement(*, annotator_id: int, workspace_ids: Iterable[int]) -> dict[str, int]:
    """{items, pairs, agreed}: over the item versions where the annotator and at least one other person answered,
    the pairs of their first answers (the annotator's, another's) and how many agree on rejecting or not. One
    query: each of the annotator's answers counts the others' on its item version through the index of reviews by
    trajectory."""
    rejecting = Case(When(decision=Decision.REJECT, then=1), default=0, output_field=IntegerField())
    mine = _first_answers(scoped(Review.objects.filter(reviewer_id=annotator_id), list(workspace_ids)))
    others = _first_answers(
        Review.objects.filter(
            trajectory_id=OuterRef("trajectory_id"), based_on_version=OuterRef("based_on_version")
        ).exclude(reviewer_id=annotator_id)
    )
    rows = mine.annotate(
        rejecting=rejecting,
        n_pairs=_count(others),
        n_agreed=_count(others.annotate(rejecting=rejecting).filter(rejecting=OuterRef("rejecting"))),
    ).values("n_pairs", "n_agreed")
    # An answer no one else gave on its item version makes no pair (its sign is 0).
    totals = rows.aggregate(items=Sum(Sign("n_pairs")), pairs=Sum("n_pairs"), agreed=Sum("n_agreed"))
    return {name: int(total or 0) for name, total in totals.items()}  # a sum is a decimal on PostgreSQL
