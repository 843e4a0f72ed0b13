"""Reads of gold items: the workspaces' gold items (for curators), and what a person learns of one once they have
answered it: the expected answer, the explanation and the expected criterion ratings, each beside their own rating
of the item's text when they rated it. Nothing of a gold item may be read for someone below the curator role who has
not answered it: it would tell them the item is gold."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import F, QuerySet

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import GoldItem, Review, ReviewStage, Trajectory
from simia_web.simulation.judge import CRITERIA


def gold_items_in(*, workspace_ids: Iterable[int]) -> QuerySet[GoldItem]:
    """The gold items of the workspaces `workspace_ids`, with who marked them and the name of their trajectory's
    domain (`domain_name`; the trajectory's own columns, its messages among them, are not read)."""
    items = GoldItem.objects.select_related("created_by").annotate(domain_name=F("trajectory__domain__name"))
    return scoped(items, workspace_ids)


@dataclass(frozen=True)
class ExpectedGrade:
    criterion: str
    expected: float
    rated: float | None  # the answerer's own rating of the text, when they rated it

    @property
    def off(self) -> float | None:
        """How far the answerer's rating is from the expected one, in grades of the judge's scale."""
        return None if self.rated is None else round(abs(self.rated - self.expected), 1)


@dataclass(frozen=True)
class GoldFeedback:
    answer: Review  # the answerer's first answer, the one their accuracy counts
    expected_decision: str
    explanation: str
    grades: list[ExpectedGrade]

    @property
    def correct(self) -> bool:
        return bool(self.answer.gold_correct)

    @property
    def rated(self) -> bool:
        """The answerer rated one of the criteria the curator expects a grade of."""
        return any(g.rated is not None for g in self.grades)

    def said(self) -> str:
        """In one sentence or a few, for a notice."""
        verdict = "matches" if self.correct else "differs from"
        said = f"That was a gold item: your answer {verdict} the expected one, {self.expected_decision}."
        if self.explanation:
            said += f" {self.explanation}"
        if self.grades:
            said += " Expected ratings: " + ", ".join(
                f"{g.criterion} {g.expected}" + (f" (yours {g.rated}, off by {g.off})" if g.rated is not None else "")
                for g in self.grades
            )
            said += "."
        return said


def first_gold_answer(reviews, user) -> Review | None:
    """`user`'s first answer on the gold item among its `reviews` (already read, in any order), or None."""
    answers = [r for r in reviews if r.stage == ReviewStage.GOLD and r.reviewer_id == user.pk]
    return min(answers, key=lambda r: r.pk) if answers else None


def gold_feedback(*, trajectory: Trajectory, answer: Review) -> GoldFeedback | None:
    """The gold item's expected answer, explanation and ratings for the author of `answer` (a gold answer of theirs
    on `trajectory`), with their own ratings of its current text; None once the item is no gold item any more. At
    most two queries."""
    gold = GoldItem.objects.filter(trajectory_id=trajectory.pk).first()
    if gold is None:
        return None
    expected = gold.expected_scores or {}
    rated: dict = {}
    if expected:
        # Ratings are calibration's (an app above this one): read through the relation it declares on the
        # trajectory, so that this module imports nothing of it.
        rated = (
            trajectory.ratings.filter(annotator_id=answer.reviewer_id, trajectory_version=trajectory.text_version)
            .values_list("scores", flat=True)
            .first()
            or {}
        )
    grades = [ExpectedGrade(c, expected[c], rated.get(c)) for c in CRITERIA if c in expected]
    return GoldFeedback(
        answer=answer, expected_decision=gold.expected_decision, explanation=gold.explanation, grades=grades
    )
