"""Holds: who is working on an item right now. A person holds one item at a time, for
SIMIA_RESERVATION_SECONDS unless renewed; nobody else can decide, edit or revert it meanwhile."""

import random
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from simia_web.accounts.models import Workspace
from simia_web.core.errors import HeldByOther, ValidationFailed
from simia_web.curation.models import Review, ReviewStage, Trajectory
from simia_web.curation.selectors.queue import queue_after
from simia_web.curation.selectors.trajectory import free_for, reservation_holder


class ReviewError(ValidationFailed):
    """A review that cannot be applied (missing reason, invalid edit); `field` names the input at fault."""


# A write's fields that let go of the hold: the work on the item is done.
RELEASED: dict[str, Any] = {"reserved_by": None, "reserved_until": None}


def _reservation_until():
    return timezone.now() + timedelta(seconds=settings.SIMIA_RESERVATION_SECONDS)


def trajectory_reserve(*, trajectory: Trajectory, user) -> bool:
    """Hold (or keep holding) the trajectory for `user` for SIMIA_RESERVATION_SECONDS unless someone else does.

    Returns True when `user` now holds it. A single conditional UPDATE, so two annotators cannot both win;
    the open review page and the editor call it again before the time runs out.
    """
    until = _reservation_until()
    won = Trajectory.objects.filter(free_for(user), pk=trajectory.pk).update(reserved_by=user, reserved_until=until)
    if won:
        trajectory.reserved_by, trajectory.reserved_until = user, until
    else:
        trajectory.refresh_from_db(fields=["reserved_by", "reserved_until"])
    return bool(won)


def trajectory_hold(*, trajectory: Trajectory, user) -> bool:
    """Work on this item now (the editor, "start reviewing from here"): `user` lets go of any other item and holds
    this one, unless someone else does. Returns True when `user` holds it."""
    _release_others(user, trajectory.pk)
    return trajectory_reserve(trajectory=trajectory, user=user)


def _release_others(user, keep_id: int) -> None:
    """A person works on one item at a time: their holds on any other go."""
    Trajectory.objects.filter(reserved_by=user).exclude(pk=keep_id).update(**RELEASED)


def trajectory_release(*, trajectory_id: int, user) -> bool:
    """Give up `user`'s hold on a trajectory (the Release button, or the page being left)."""
    return bool(Trajectory.objects.filter(pk=trajectory_id, reserved_by=user).update(**RELEASED))


def trajectory_claim_next(*, queue, user, after_id: int | None = None, sort: str | None = None) -> Trajectory | None:
    """The review stream: release what `user` holds and claim the first free item of `queue` (after `after_id`).

    `queue` is an ordered queryset (selectors.review_queue). Another annotator may claim the same row between
    the read and the conditional UPDATE; then the next free one is tried.
    """
    Trajectory.objects.filter(reserved_by=user).update(**RELEASED)
    candidates = queue.filter(free_for(user), reviewable=True)
    # Items the person has voted on wait for the others' votes, not theirs.
    voted = Review.objects.filter(trajectory=OuterRef("pk"), reviewer=user, stage=ReviewStage.VOTE, undone_at=None)
    candidates = candidates.exclude(Exists(voted))
    # Gold items the person has answered are behind them; one they have not is given at the workspace's gold rate.
    answered = list(
        Review.objects.filter(reviewer=user, stage=ReviewStage.GOLD).values_list("trajectory_id", flat=True)[
            :GOLD_ANSWERS_READ
        ]
    )
    if answered:
        candidates = candidates.exclude(pk__in=answered)
    gold = _gold_drawn(candidates, user)
    if gold is not None:
        return gold
    if after_id is not None:
        candidates = queue_after(candidates, after_id, sort)
    for _ in range(20):
        candidate = candidates.only("pk").first()
        if candidate is None:
            return None
        if trajectory_reserve(trajectory=candidate, user=user):
            return candidate
    return None


# The stream reads at most this many of a person's gold answers to leave their items out.
GOLD_ANSWERS_READ = 10_000


def _gold_drawn(candidates, user) -> Trajectory | None:
    """A gold item of the queue `user` has not answered, held for them, at their workspace's gold rate (a draw per
    item claimed); None otherwise."""
    rate = Workspace.objects.filter(pk=user.current_workspace_id).values_list("gold_rate", flat=True).first() or 0.0
    if random.random() >= rate:  # a draw of what to show, no secret
        return None
    gold = candidates.filter(gold__isnull=False).order_by("?").only("pk").first()
    if gold is not None and trajectory_reserve(trajectory=gold, user=user):
        return gold
    return None


def _hold_check(locked: Trajectory, user) -> None:
    holder = reservation_holder(locked, user)
    if holder is not None:
        raise HeldByOther(f"{holder} is reviewing trajectory {locked.pk} right now.", version=locked.version)
