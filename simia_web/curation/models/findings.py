"""What the deterministic rules and the judge found in a trajectory: its rule violations and the judge's verdicts."""

from django.db import models

from .trajectory import Trajectory


class RuleViolation(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="violations")

    workspace_path = "trajectory__domain__workspace"
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

    workspace_path = "trajectory__domain__workspace"
    passed = models.BooleanField(null=True)
    scores = models.JSONField(default=dict)
    score = models.FloatField(null=True)
    confidence = models.FloatField(null=True)
    rationale = models.TextField(blank=True)
    cited_messages = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    trajectory_version = models.PositiveIntegerField(default=1, help_text="The trajectory version this verdict judged.")
    profile = models.ForeignKey("llm.EndpointProfile", null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=120, blank=True)
    llm_call = models.ForeignKey("llm.LLMCall", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"verdict {self.pk} passed={self.passed}"
