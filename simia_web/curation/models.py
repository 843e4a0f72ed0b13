from django.conf import settings
from django.db import models

from simia_web.core.fields import DocumentJSONField


class TrajectoryKind(models.TextChoices):
    ROLLOUT = "rollout", "Simulated rollout"
    AMPLIFIED = "amplified", "Amplified from a seed"
    RL = "rl", "RL environment episode"
    DEMO = "demo", "Demo data"


class TrajectoryStatus(models.TextChoices):
    GENERATED = "generated", "Generated"
    RULES_FAILED = "rules_failed", "Rules failed"
    JUDGED_PASS = "judged_pass", "Judge: pass"
    JUDGED_FAIL = "judged_fail", "Judge: fail"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"


class Trajectory(models.Model):
    """A conversation in the canonical format: OpenAI chat messages plus the tools list.

    `steps` keeps per-message simulator data keyed by message index (as a string):
    {"patch": [...], "state_after": {...}, "errors": [...]}.
    """

    kind = models.CharField(max_length=16, choices=TrajectoryKind.choices)
    status = models.CharField(
        max_length=16, choices=TrajectoryStatus.choices, default=TrajectoryStatus.GENERATED, db_index=True
    )
    domain = models.ForeignKey("catalog.Domain", on_delete=models.PROTECT, related_name="trajectories")
    task = models.ForeignKey(
        "catalog.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories"
    )
    seed = models.ForeignKey("catalog.Seed", null=True, blank=True, on_delete=models.SET_NULL, related_name="outputs")
    seed_version = models.PositiveIntegerField(null=True, blank=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories")
    unit = models.OneToOneField(
        "jobs.JobUnit", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectory"
    )
    messages = DocumentJSONField(default=list)
    tools = DocumentJSONField(default=list, blank=True)
    steps = DocumentJSONField(default=dict, blank=True)
    initial_state = DocumentJSONField(default=dict, blank=True)
    final_state = DocumentJSONField(default=dict, blank=True)
    termination_reason = models.CharField(max_length=40, blank=True)
    reward = models.FloatField(null=True, blank=True)
    # Copied from the latest judge verdict so the review queue can filter and order in SQL.
    judge_passed = models.BooleanField(null=True, blank=True)
    judge_score = models.FloatField(null=True, blank=True)
    judge_confidence = models.FloatField(null=True, blank=True)
    violation_count = models.PositiveIntegerField(default=0)
    provenance = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, blank=True, db_index=True)
    version = models.PositiveIntegerField(default=1)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_trajectories"
    )
    reserved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="reserved_trajectories"
    )
    reserved_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["domain", "status"]), models.Index(fields=["job", "status"])]

    def __str__(self):
        return f"trajectory {self.pk} ({self.status})"


class RuleViolation(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="violations")
    code = models.CharField(max_length=40, db_index=True)
    message_index = models.IntegerField(null=True, blank=True)
    detail = models.TextField(blank=True)
    fixed = models.BooleanField(default=False, help_text="Repaired automatically; the repair is recorded here.")

    class Meta:
        ordering = ["trajectory_id", "message_index", "id"]

    def __str__(self):
        return f"{self.code}@{self.message_index}"


class JudgeVerdict(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="verdicts")
    passed = models.BooleanField(null=True)
    scores = models.JSONField(default=dict)
    score = models.FloatField(null=True)
    confidence = models.FloatField(null=True)
    rationale = models.TextField(blank=True)
    cited_messages = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    profile = models.ForeignKey("llm.EndpointProfile", null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=120, blank=True)
    llm_call = models.ForeignKey("llm.LLMCall", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"verdict {self.pk} passed={self.passed}"


class Decision(models.TextChoices):
    ACCEPT = "accept", "Accept"
    REJECT = "reject", "Reject"
    FIX_ACCEPT = "fix_accept", "Fix and accept"


class Review(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason = models.TextField(blank=True)
    trajectory_version = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"{self.decision} on {self.trajectory_id}"
