"""What people do with a trajectory: their decisions (reviews bound to a text version), the record of what made
each version, and the editor's unsaved drafts."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from .trajectory import Trajectory, TrajectoryStatus


class Decision(models.TextChoices):
    ACCEPT = "accept", "Accept"
    REJECT = "reject", "Reject"
    FIX_ACCEPT = "fix_accept", "Fix and accept"


# The status a decision leaves its trajectory in (where no reviewer stage holds it).
STATUS_FOR_DECISION: dict[str, str] = {
    Decision.ACCEPT: TrajectoryStatus.ACCEPTED,
    Decision.FIX_ACCEPT: TrajectoryStatus.ACCEPTED,
    Decision.REJECT: TrajectoryStatus.REJECTED,
}


class ReviewStage(models.TextChoices):
    """Where an annotator's decision is in the reviewer stage. Empty: it needed no second look (the stage was off,
    or a reviewer or curator made it) and counts as it is."""

    NONE = "", "No second look"
    AWAITING = "awaiting", "Awaiting review"
    CONFIRMED = "confirmed", "Confirmed"
    FIXED = "fixed", "Fixed and confirmed"
    OVERTURNED = "overturned", "Overturned"
    # Confirmed with the rest of the annotator's batch, on a sample of their decisions settled one by one.
    BULK = "bulk", "Confirmed in bulk, on a sample"
    # An annotator's answer on a gold item: kept as their answer, it leaves the item as it was and never stands.
    GOLD = "gold", "Answer on a gold item"
    # Consensus (an assignment batch's rule over its k annotators): each annotator's answer is a vote, kept and never
    # standing; the votes that meet the rule make one decision that stands (CONSENSUS), and votes that cannot make
    # one the rule accepts leave a decision DISPUTED in the reviewer queue until a reviewer ADJUDICATES it.
    VOTE = "vote", "Vote under a consensus rule"
    CONSENSUS = "consensus", "Decided by consensus"
    DISPUTED = "disputed", "Votes disagree: awaiting a reviewer"
    ADJUDICATED = "adjudicated", "Adjudicated by a reviewer"


# The stages of a decision a reviewer settled one by one: a sample a bulk confirmation can rest on.
SETTLED_ONE_BY_ONE = (ReviewStage.CONFIRMED, ReviewStage.FIXED, ReviewStage.OVERTURNED)


# The answers that set annotators side by side on one item version: gold answers, and consensus votes, the deciding
# vote included (kept as the consensus or disputed decision it made, adjudicated once a reviewer settles it, on the
# version voted on: `based_on_version`).
PEER_STAGES = (
    ReviewStage.GOLD,
    ReviewStage.VOTE,
    ReviewStage.CONSENSUS,
    ReviewStage.DISPUTED,
    ReviewStage.ADJUDICATED,
)


# The stages of a standing decision that waits for a reviewer: the item is not decided yet.
WAITING_FOR_REVIEWER = (ReviewStage.AWAITING, ReviewStage.DISPUTED)


# A decision that stands: neither undone nor superseded by a later change.
STANDING = Q(undone_at__isnull=True, superseded_at__isnull=True)


class Review(models.Model):
    """A person's decision. It stands while the trajectory stays at `trajectory_version`, the version the decision
    made; an undo (undone_at) or a later change to the text (superseded_at) ends it, and the row stays as history."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="reviews")

    workspace_path = "trajectory__domain__workspace"
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason = models.TextField(blank=True)
    trajectory_version = models.PositiveIntegerField(help_text="The version this decision made.")
    based_on_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The version the reviewer was looking at (when the decision recorded it)."
    )
    # Part of a bulk action: shown apart, and not counted as an individual judgement in agreement.
    bulk = models.BooleanField(default=False)
    batch = models.UUIDField(null=True, blank=True, db_index=True, help_text="The bulk action it was part of.")
    # The audit (audits.Audit, named by id: that app sits above this one) whose estimate a bulk acceptance rests on.
    audit = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The audit whose estimate this (bulk) decision rests on."
    )
    # A reviewer's bulk confirmation of the rest of an annotator's batch names the sample it rests on: the ids of
    # the annotator's decisions the reviewers settled one by one.
    sample = models.JSONField(null=True, blank=True, help_text="The settled decisions a bulk confirmation rests on.")
    # The guidelines in force when the decision was made (catalog.guidelines), and their version: empty when there
    # were none.
    guidelines = models.ForeignKey(
        "catalog.Guidelines", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    guidelines_version = models.PositiveIntegerField(null=True, blank=True)
    # The reviewer stage: an awaiting decision is settled by a reviewer's own decision (a Review of theirs, which
    # then stands), and says here who settled it, how, when and (for an overturn) why.
    stage = models.CharField(max_length=12, choices=ReviewStage.choices, blank=True, default=ReviewStage.NONE)
    checked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="checked_reviews"
    )
    checked_at = models.DateTimeField(null=True, blank=True)
    check_reason = models.TextField(blank=True)
    # On a gold item: whether the answer was the expected one.
    gold_correct = models.BooleanField(null=True, blank=True)
    # Of a decision waiting for a reviewer, copied when it is made so that the reviewer queue reads neither the
    # trajectories nor the domains: the trajectory's domain, and whether the decision goes against its judge. An
    # answer on a gold item carries its domain too, for the annotators' gold accuracy the queue orders by.
    domain = models.ForeignKey("catalog.Domain", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    against_judge = models.BooleanField(null=True, blank=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="undone_reviews"
    )
    superseded_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="superseded_reviews"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The decision that stands on a trajectory (at most one).
            models.Index(fields=["trajectory"], name="review_standing", condition=STANDING),
            # The decisions resting on an audit (few reviews do).
            models.Index(fields=["audit", "trajectory"], name="review_audit", condition=Q(audit__isnull=False)),
            # The reviewer queue: decisions waiting for a reviewer that still stand, per domain, oldest first.
            models.Index(
                fields=["domain", "created_at", "id"],
                name="review_waiting",
                include=["against_judge", "reviewer", "stage"],
                condition=STANDING & Q(stage__in=WAITING_FOR_REVIEWER),
            ),
            # Each annotator's latest bulk confirmation: where their next batch starts.
            models.Index(fields=["reviewer", "-created_at"], name="review_bulk_confirmed", condition=Q(stage="bulk")),
            # An annotator's answers beside others' (agreement with other annotators), and the others' on an item
            # version.
            models.Index(
                fields=["reviewer", "trajectory", "based_on_version"],
                name="review_peer_answers",
                condition=Q(stage__in=PEER_STAGES),
            ),
            models.Index(
                fields=["trajectory", "based_on_version", "reviewer"],
                name="review_peer_answers_item",
                condition=Q(stage__in=PEER_STAGES),
            ),
            # An annotator's answers on gold items, latest first.
            models.Index(fields=["reviewer", "-id"], name="review_gold_answers", condition=Q(stage="gold")),
            # An annotator's decisions reviewers settled one by one, latest first: a bulk confirmation's sample.
            models.Index(
                fields=["reviewer", "-id"],
                name="review_settled",
                condition=Q(stage__in=SETTLED_ONE_BY_ONE),
            ),
            # An annotator's overturned decisions, latest first.
            models.Index(fields=["reviewer", "-checked_at"], name="review_overturned", condition=Q(stage="overturned")),
        ]

    def __str__(self):
        return f"{self.decision} on {self.trajectory_id}"

    @property
    def standing(self) -> bool:
        return self.undone_at is None and self.superseded_at is None


class Change(models.TextChoices):
    EDIT = "edit", "edited"
    FIX_ACCEPT = "fix_accept", "fixed and accepted"
    ACCEPT = "accept", "accepted"
    REJECT = "reject", "rejected"
    REVERT = "revert", "reverted"
    UNDO = "undo", "undid a decision"
    SEND_BACK = "send_back", "sent back for review"


class TrajectoryChange(models.Model):
    """What made each version after the generated one (version 1), and who: the record a refused write names."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="changes")

    workspace_path = "trajectory__domain__workspace"
    version = models.PositiveIntegerField()
    action = models.CharField(max_length=16, choices=Change.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    detail = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trajectory_id", "version"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "version"], name="trajectory_change_unique_version")
        ]

    def __str__(self):
        return f"{self.trajectory_id} v{self.version} {self.action}"


class EditorDraft(models.Model):
    """The editor's unsaved work of one person on one trajectory, saved as they type: the form's fields as posted
    ({name: [values]}), and the version they were editing."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="drafts")

    workspace_path = "trajectory__domain__workspace"
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="editor_drafts")
    based_on_version = models.PositiveIntegerField()
    fields = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trajectory", "author"], name="editor_draft_one_per_author")]

    def __str__(self):
        return f"draft of {self.trajectory_id} by {self.author_id}"
