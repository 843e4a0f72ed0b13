"""Judge calibration: annotators' criterion ratings and error labels, rating assignments, and calibration runs
that replay the judge on rated items."""

from django.conf import settings
from django.db import models

from simia_web.accounts.models import owner_workspace_field


class ErrorType(models.TextChoices):
    """What went wrong in a message, as annotators label it. The taxonomy follows the judge's criteria, so a label
    says which criterion it costs: a wrong tool or argument (tool_use_correct), a simulated result that contradicts
    the state or an earlier result (simulator_consistent), a broken policy rule (policy_followed), an answer the
    tool results do not support (final_answer_grounded), and the task left undone (task_completed)."""

    WRONG_TOOL = "wrong_tool", "Wrong tool called"
    BAD_ARGUMENTS = "bad_arguments", "Wrong or invalid arguments"
    MISSING_CALL = "missing_call", "A needed call is missing"
    INCONSISTENT_RESULT = "inconsistent_result", "Tool result inconsistent with the state"
    POLICY_VIOLATION = "policy_violation", "Policy not followed"
    UNGROUNDED_CLAIM = "ungrounded_claim", "Claim not supported by tool results"
    TASK_NOT_DONE = "task_not_done", "Task left undone"
    UNNATURAL_USER = "unnatural_user", "Unrealistic user turn"
    OTHER = "other", "Other"


class CriterionRating(models.Model):
    """One annotator's ratings of one text version of a trajectory, per judge criterion on the judge's scale
    (simulation.judge: CRITERIA, GRADES). It counts while the trajectory's text stays at `trajectory_version`; a
    change to the text leaves it as history, as it does a decision."""

    trajectory = models.ForeignKey("curation.Trajectory", on_delete=models.CASCADE, related_name="ratings")

    workspace_path = "trajectory__domain__workspace"
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="ratings")
    trajectory_version = models.PositiveIntegerField(help_text="The text version rated.")
    scores = models.JSONField(default=dict, help_text="{criterion: grade}; a criterion left out was not rated.")
    comment = models.TextField(blank=True)
    # The guidelines in force when the rating was written (catalog.guidelines), and their version.
    guidelines = models.ForeignKey(
        "catalog.Guidelines", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    guidelines_version = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["trajectory_id", "annotator_id", "-trajectory_version"]
        constraints = [
            models.UniqueConstraint(
                fields=["trajectory", "annotator", "trajectory_version"], name="rating_once_per_annotator_version"
            )
        ]
        indexes = [models.Index(fields=["trajectory", "trajectory_version"], name="rating_by_version")]

    def __str__(self):
        return f"rating of {self.trajectory_id} v{self.trajectory_version} by {self.annotator_id}"


class MessageLabel(models.Model):
    """An annotator's error types and comment on one message of the version they rated."""

    rating = models.ForeignKey(CriterionRating, on_delete=models.CASCADE, related_name="message_labels")

    workspace_path = "rating__trajectory__domain__workspace"
    message_index = models.PositiveIntegerField()
    error_types = models.JSONField(default=list, blank=True)
    comment = models.TextField(blank=True)

    class Meta:
        ordering = ["rating_id", "message_index"]
        constraints = [
            models.UniqueConstraint(fields=["rating", "message_index"], name="message_label_once_per_rating")
        ]

    def __str__(self):
        return f"#{self.message_index} of {self.rating_id}"


class ConsensusRule(models.TextChoices):
    """How the k annotators' answers of an assignment batch decide its items. Empty: they rate, and each decision
    counts alone, as any other. Otherwise each answer is a vote (curation.services.consensus): MAJORITY decides with
    more than half of the k votes, and sends a tie to a reviewer; UNANIMOUS decides when all k agree, and sends any
    split to a reviewer once all k have voted; ADJUDICATE decides when all k agree, and sends the item to a reviewer
    at the first vote that differs, without waiting for the others."""

    NONE = "", "None: each decision counts"
    MAJORITY = "majority", "Majority"
    UNANIMOUS = "unanimous", "Unanimous"
    ADJUDICATE = "adjudicate", "A reviewer adjudicates any disagreement"


class AssignmentBatch(models.Model):
    """One act of handing items to annotators: which items (`selection` as given), how many annotators each, and the
    rule by which their answers decide the items."""

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    overlap = models.PositiveSmallIntegerField(help_text="Annotators per item (k).")
    consensus = models.CharField(max_length=12, choices=ConsensusRule.choices, blank=True, default=ConsensusRule.NONE)
    selection = models.JSONField(default=dict, help_text="The filter or the ids the items were picked by.")
    created_at = models.DateTimeField(auto_now_add=True)
    workspace = owner_workspace_field()

    workspace_path = "workspace"

    def __str__(self):
        return f"assignment batch {self.pk} (k={self.overlap})"


class RatingAssignment(models.Model):
    """An item given to an annotator to rate. It is done when they have rated its current text."""

    batch = models.ForeignKey(AssignmentBatch, on_delete=models.CASCADE, related_name="assignments")

    workspace_path = "batch__workspace"
    trajectory = models.ForeignKey("curation.Trajectory", on_delete=models.CASCADE, related_name="rating_assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rating_assignments")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "annotator"], name="rating_assignment_once_per_annotator")
        ]
        indexes = [models.Index(fields=["annotator", "id"], name="rating_assignment_inbox")]

    def __str__(self):
        return f"{self.trajectory_id} to {self.annotator_id}"


class CalibrationRun(models.Model):
    """A judge configuration (prompt version x endpoint profile) run over the human-rated items. Its answers are
    kept apart from the trajectories' verdicts; `summary` holds its figures, written when it ends."""

    prompt_version = models.CharField(max_length=40)
    profile = models.ForeignKey("llm.EndpointProfile", null=True, on_delete=models.SET_NULL, related_name="+")
    profile_name = models.CharField(max_length=80, help_text="The profile's name when the run was queued.")
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="calibration_run"
    )
    summary = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    workspace = owner_workspace_field()

    workspace_path = "workspace"

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"calibration run {self.pk} ({self.prompt_version} x {self.profile_name})"


class CalibrationAnswer(models.Model):
    """The judge's answer on one rated item in a run: its per-criterion scores, or why there are none."""

    run = models.ForeignKey(CalibrationRun, on_delete=models.CASCADE, related_name="answers")

    workspace_path = "run__workspace"
    trajectory = models.ForeignKey("curation.Trajectory", on_delete=models.CASCADE, related_name="+")
    trajectory_version = models.PositiveIntegerField()
    scores = models.JSONField(default=dict, blank=True)
    passed = models.BooleanField(null=True)
    error = models.TextField(blank=True, help_text="Why the judge gave no usable answer.")
    llm_call = models.ForeignKey("llm.LLMCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["run_id", "trajectory_id"]
        constraints = [models.UniqueConstraint(fields=["run", "trajectory"], name="calibration_answer_once_per_run")]

    def __str__(self):
        return f"answer on {self.trajectory_id} in {self.run_id}"


class RatingsRevision(models.Model):
    """One row whose number every rating write advances in its own transaction. The row's lock orders the writes,
    so a reader that sees number N sees every rating write up to the N-th: figures computed after reading N may be
    kept under it (see KeptFigures)."""

    number = models.PositiveBigIntegerField(default=0)

    def __str__(self):
        return f"ratings revision {self.number}"


class KeptFigures(models.Model):
    """Agreement figures (`name`) as computed from the ratings and verdicts that `fingerprint` stands for, so that
    the pages read them instead of computing them again; a fingerprint that moves on leaves them unread, and the next
    figures computed replace them. Shared by every web process and kept across restarts."""

    name = models.CharField(max_length=40)
    fingerprint = models.CharField(max_length=200)
    figures = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "fingerprint"], name="kept_figures_once")]

    def __str__(self):
        return f"{self.name} at {self.fingerprint}"
