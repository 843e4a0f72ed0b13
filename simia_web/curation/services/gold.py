"""Gold items: a curator marks a trajectory with its expected answer, optional expected criterion ratings and an
explanation, changes it, or unmarks it. Annotators' answers on gold items are written by review_decide
(curation.services.decisions)."""

from django.db import transaction

from simia_web.core.services import audit_record
from simia_web.curation.models import Decision, GoldItem, Trajectory
from simia_web.simulation.judge import grades_clean

from .holds import ReviewError

EXPLANATION_MAX = 5_000


@transaction.atomic
def gold_mark(
    *, trajectory: Trajectory, expected_decision: str, explanation: str, actor, expected_scores: dict | None = None
) -> GoldItem:
    """Make the trajectory a gold item with `expected_decision` (accept or reject) and the expected grades of the
    criteria the curator rated ({criterion: grade} on the judge's scale), or change them."""
    if expected_decision not in (Decision.ACCEPT, Decision.REJECT):
        raise ReviewError("The expected answer is accept or reject.", field="expected_decision")
    scores = grades_clean(expected_scores or {}, field="expected_scores")
    explanation = (explanation or "").strip()
    if len(explanation) > EXPLANATION_MAX:
        raise ReviewError(f"An explanation of at most {EXPLANATION_MAX} characters.", field="explanation")
    gold, created = GoldItem.objects.update_or_create(
        trajectory=trajectory,
        defaults={
            "expected_decision": expected_decision,
            "expected_scores": scores,
            "explanation": explanation,
            "created_by": actor,
        },
    )
    audit_record(
        actor=actor,
        action="trajectory.gold" if created else "trajectory.gold_change",
        target=trajectory,
        data={"expected": expected_decision, "expected_scores": scores},
    )
    return gold


@transaction.atomic
def gold_unmark(*, trajectory: Trajectory, actor) -> bool:
    """The trajectory is no gold item any more (the answers given on it stay, as history)."""
    removed = GoldItem.objects.filter(trajectory=trajectory).delete()[0] > 0
    if removed:
        audit_record(actor=actor, action="trajectory.gold_remove", target=trajectory, data={})
    return removed
