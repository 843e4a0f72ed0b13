"""What a bulk decision would do: the items it changes and those it leaves as they are, counted."""

import uuid
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q

from simia_web.curation.models import STANDING, Decision, Review, Trajectory

from .trajectory import HUMAN_STATUSES, free_for


@dataclass
class BulkOutcome:
    changed: int
    held: int  # reserved by someone else right now
    decided: int  # already carry an individual person's decision, left as they are
    unreviewable: int  # empty or errored, which cannot be accepted
    batch: uuid.UUID | None = None  # names the action for its undo


def bulk_split(trajectories, reviewer, decision: str, *, lock: bool) -> tuple[BulkOutcome, list[tuple[int, int, str]]]:
    """The outcome's counts and the (id, version, status) of each item a bulk `decision` changes; with `lock`, the
    rows are locked for the write that follows (curation.services.bulk.reviews_bulk)."""
    qs = Trajectory.objects.filter(pk__in=trajectories.values("pk"))
    if lock:
        qs = qs.select_for_update()
    individual = Review.objects.filter(STANDING, trajectory=OuterRef("pk"), bulk=False)
    rows = qs.annotate(
        held=~free_for(reviewer),
        decided=Exists(individual) & Q(status__in=HUMAN_STATUSES),
    ).values_list("pk", "version", "status", "reviewable", "held", "decided")
    outcome, ready = BulkOutcome(0, 0, 0, 0), []
    for pk, version, status, reviewable, held, decided in rows:
        if held:
            outcome.held += 1
        elif decided:
            outcome.decided += 1
        elif decision == Decision.ACCEPT and not reviewable:
            outcome.unreviewable += 1
        else:
            ready.append((pk, version, status))
    outcome.changed = len(ready)
    return outcome, ready


def bulk_preview(*, trajectories, reviewer, decision: str) -> BulkOutcome:
    """What reviews_bulk would do to these trajectories, for the confirmation that names the counts."""
    return bulk_split(trajectories, reviewer, decision, lock=False)[0]
