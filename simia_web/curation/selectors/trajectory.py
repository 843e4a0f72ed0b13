"""One trajectory: everything its page shows in one query plus prefetches, its standing decision and verdicts,
the reader's draft and who holds it. Reads start from the workspaces they are given (accounts.scoping): another
workspace's trajectory or decision is not found."""

from collections.abc import Iterable

from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import (
    STANDING,
    EditorDraft,
    JudgeVerdict,
    Review,
    ReviewStage,
    Trajectory,
    TrajectoryStatus,
)
from simia_web.formats.conversation import message_text


def trajectories_in(*, workspace_ids: Iterable[int]) -> QuerySet[Trajectory]:
    """The trajectories of the workspaces `workspace_ids`: where every read of one begins."""
    return scoped(Trajectory.objects.all(), workspace_ids)


def reviews_in(*, workspace_ids: Iterable[int]) -> QuerySet[Review]:
    """The decisions made on the workspaces' trajectories."""
    return scoped(Review.objects.all(), workspace_ids)


def trajectory_detail_queryset(*, workspace_ids: Iterable[int] | None = None) -> QuerySet[Trajectory]:
    """What one trajectory's page reads, in one query plus prefetches, among the workspaces' trajectories. None
    reads every trajectory: only for a caller that reached the item through something of its workspace already
    (an audit's sample)."""
    trajectories = Trajectory.objects.all() if workspace_ids is None else trajectories_in(workspace_ids=workspace_ids)
    return trajectories.select_related("domain", "task", "seed", "job", "assigned_to", "reserved_by").prefetch_related(
        "violations",
        Prefetch("verdicts", queryset=JudgeVerdict.objects.select_related("profile")),
        Prefetch(
            "reviews", queryset=Review.objects.select_related("reviewer", "undone_by", "superseded_by", "checked_by")
        ),
    )


def standing_review(reviews) -> Review | None:
    """The decision that stands on a trajectory, from its (prefetched) reviews: at most one does."""
    return next((review for review in reviews if review.standing), None)


def verdicts_split(verdicts) -> tuple[JudgeVerdict | None, list[JudgeVerdict], list[JudgeVerdict]]:
    """(the standing verdict: the latest that is not a failed call; the failed calls since it; the earlier verdicts)
    of a trajectory's verdicts, newest first. A failed call never replaces a verdict, it is shown beside it."""
    standing = next((v for v in verdicts if not v.error), None)
    if standing is None:
        return None, [v for v in verdicts if v.error], []
    position = verdicts.index(standing)
    return standing, verdicts[:position], [v for v in verdicts[position + 1 :] if not v.error]


def draft_for(trajectory: Trajectory, user) -> EditorDraft | None:
    return EditorDraft.objects.filter(trajectory=trajectory, author=user).first()


# The statuses a person's decision sets (the pipelines set the others).
HUMAN_STATUSES = frozenset({TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED, TrajectoryStatus.AWAITING_REVIEW})


def free_for(user) -> Q:
    """Trajectories `user` may work on now: nobody holds them, the hold ran out, or `user` holds them."""
    return Q(reserved_by__isnull=True) | Q(reserved_until__lt=timezone.now()) | Q(reserved_by=user)


def reservation_holder(trajectory: Trajectory, user):
    """The other user holding a live reservation on the trajectory, or None."""
    if (
        trajectory.reserved_by_id
        and trajectory.reserved_by_id != user.pk
        and trajectory.reserved_until
        and trajectory.reserved_until > timezone.now()
    ):
        return trajectory.reserved_by
    return None


def review_standing(review_id: int) -> Review | None:
    """The decision `review_id` while it stands (neither undone nor superseded), else None."""
    return Review.objects.filter(STANDING, pk=review_id).first()


def task_text(trajectory: Trajectory) -> str:
    """What the judge is told the trajectory had to do: its task and expected outcome, or its first request."""
    if trajectory.task_id and (task := trajectory.task) is not None:
        return f"{task.instruction}\nExpected outcome: {task.expected_outcome}"
    first = next((message_text(m) for m in trajectory.messages if m.get("role") == "user"), "")
    return "Serve the user's requests in this conversation. The first was: " + first


def stages_hidden_from(user) -> tuple[str, ...]:
    """The stages of other people's reviews `user` may not read on an item: their answers on a gold item would tell it
    is gold, so only curators read them (everyone reads their own, given once they have decided); other annotators'
    votes under a consensus rule would sway the reader's own, so only reviewers and above read them."""
    has_role = getattr(user, "has_role", None)  # an anonymous user has no role
    if has_role and has_role("curator"):
        return ()
    if has_role and has_role("reviewer"):
        return (ReviewStage.GOLD,)
    return (ReviewStage.GOLD, ReviewStage.VOTE)
