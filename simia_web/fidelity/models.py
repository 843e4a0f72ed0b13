"""Fidelity runs: the simulator's answers to recorded calls set beside a real reference environment's, per call."""

from django.conf import settings
from django.db import models


class Outcome(models.TextChoices):
    """How a simulated response compares with the reference's answer to the same call."""

    EQUAL = "equal", "Equal"
    EQUIVALENT = "equivalent", "Equivalent"
    DIFFERENT = "different", "Different"
    REFERENCE_ERROR = "reference_error", "Reference error"


class FidelityRun(models.Model):
    """One measurement of a domain's simulator against its reference: the tool calls of the domain's
    trajectories replayed, each trajectory in a fresh session. `summary` holds the totals, per API and per
    outcome, written when the run ends."""

    domain = models.ForeignKey("catalog.Domain", on_delete=models.CASCADE, related_name="fidelity_runs")

    workspace_path = "domain__workspace"
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="fidelity_run"
    )
    reference = models.JSONField(default=dict, help_text="The reference as this run used it.")
    method = models.CharField(max_length=40)
    limit = models.PositiveIntegerField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"fidelity run {self.pk} ({self.domain_id})"


class FidelityTrajectory(models.Model):
    """A trajectory's calls in one run: counts per outcome, and its fidelity (equal or equivalent calls among
    those the reference answered). `latest` marks the newest run's row of each trajectory."""

    run = models.ForeignKey(FidelityRun, on_delete=models.CASCADE, related_name="trajectories")

    workspace_path = "run__domain__workspace"
    trajectory = models.ForeignKey("curation.Trajectory", on_delete=models.CASCADE, related_name="fidelity_results")
    trajectory_version = models.PositiveIntegerField()
    counts = models.JSONField(default=dict)
    calls = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0, help_text="Calls refused before the simulator saw them.")
    score = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Why the reference could not be used for this trajectory.")
    latest = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "trajectory_id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "trajectory"], name="fidelity_trajectory_once_per_run"),
            models.UniqueConstraint(
                fields=["trajectory"], condition=models.Q(latest=True), name="fidelity_trajectory_one_latest"
            ),
        ]

    def __str__(self):
        return f"trajectory {self.trajectory_id} in fidelity run {self.run_id}"


class FidelityCall(models.Model):
    """One tool call: what the simulator answered beside what the reference answered, and how they compare."""

    run = models.ForeignKey(FidelityRun, on_delete=models.CASCADE, related_name="calls")

    workspace_path = "run__domain__workspace"
    result = models.ForeignKey(FidelityTrajectory, on_delete=models.CASCADE, related_name="call_results")
    message_index = models.PositiveIntegerField()
    position = models.PositiveSmallIntegerField(default=0)
    api = models.CharField(max_length=120)
    arguments = models.JSONField(default=dict)
    simulated = models.JSONField(null=True)
    reference = models.JSONField(null=True)
    reference_is_error = models.BooleanField(default=False)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["result_id", "message_index", "position"]
        indexes = [models.Index(fields=["run", "api", "outcome"])]

    def __str__(self):
        return f"{self.api} at message {self.message_index}: {self.outcome}"
