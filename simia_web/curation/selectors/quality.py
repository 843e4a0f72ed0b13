"""An annotator's quality in a workspace: accuracy on gold items (their first answer on each) with a 95% Wilson
interval and its trend over their answers, and agreement with reviewers (how often reviewers overturn them, from
the rollups)."""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Min, Q

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import Review, ReviewStage

from .second_look import overturn_rates

Z95 = 1.959964
# The trend is the accuracy of consecutive blocks of this many answers, over the latest TREND_ANSWERS answers.
TREND_BLOCK = 10
TREND_ANSWERS = 200


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

    @property
    def accuracy(self) -> float | None:
        return self.gold_correct / self.gold_answered if self.gold_answered else None

    @property
    def overturn_rate(self) -> float | None:
        return self.overturned / self.settled if self.settled else None

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
    return Quality(
        gold_answered=totals["n"],
        gold_correct=totals["correct"],
        interval=wilson(totals["correct"], totals["n"]),
        trend=trend,
        overturned=overturned,
        settled=settled,
    )
