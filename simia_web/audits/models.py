"""Audits: a population of trajectories frozen at creation, a sample drawn from it with known inclusion
probabilities, and the figures the estimate needs frozen beside it.

The population is stored compactly (AuditPopulation: packed arrays, one row per audit, whatever its size); only
the sample has rows (AuditItem), in the order people are given its items. Decisions on the items are ordinary
reviews (curation.Review), read when the estimate is computed.
"""

import numpy as np
from django.conf import settings
from django.db import models

from simia_web.accounts.models import owner_workspace_field


class Strategy(models.TextChoices):
    UNIFORM = "uniform", "Uniform (simple random sampling without replacement)"
    ACTIVE = "active", "Active (more likely where a person is more likely to reject)"


class Audit(models.Model):
    filters = models.JSONField(default=dict, blank=True, help_text="The trajectory filters, as the queue takes them.")
    strategy = models.CharField(max_length=16, choices=Strategy.choices)
    seed = models.BigIntegerField()
    sample_size = models.PositiveIntegerField()
    blind = models.BooleanField(
        default=True, help_text="The judge's verdict, scores and rationale stay hidden on an item until it is decided."
    )
    population = models.PositiveIntegerField(help_text="Members frozen at creation.")
    # Over the whole population, at the freeze: the judge's predictions of a person's rejection (summed), per
    # criterion {name: {"sum": predicted failures, "scored": members with a score}}, and what the judge said.
    prediction_sum = models.FloatField(default=0.0)
    criterion_sums = models.JSONField(default=dict, blank=True)
    judged = models.PositiveIntegerField(default=0, help_text="Members with a judge verdict at the freeze.")
    judge_failed = models.PositiveIntegerField(default=0, help_text="Members the judge failed at the freeze.")
    judge = models.JSONField(
        default=list, blank=True, help_text="The judge configurations of the members' verdicts: [{model, profile, n}]."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    workspace = owner_workspace_field()

    workspace_path = "workspace"

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"audit {self.pk} ({self.strategy}, {self.sample_size} of {self.population})"


class AuditPopulation(models.Model):
    """An audit's members as packed little-endian arrays, in id order: ids (int64), the text version each had at
    the freeze (int32), each one's inclusion probability (float64) and the judge's prediction of a person's
    rejection that the strategy used (float64; NaN where there was nothing to predict from). Written once."""

    audit = models.OneToOneField(Audit, on_delete=models.CASCADE, primary_key=True, related_name="members")

    workspace_path = "audit__workspace"
    ids = models.BinaryField()
    text_versions = models.BinaryField()
    inclusion = models.BinaryField()
    predictions = models.BinaryField()

    def __str__(self):
        return f"population of audit {self.pk}"

    @staticmethod
    def packed(array: np.ndarray, dtype: str) -> bytes:
        return np.ascontiguousarray(array, dtype=dtype).tobytes()

    def array(self, name: str) -> np.ndarray:
        dtype = {"ids": "<i8", "text_versions": "<i4", "inclusion": "<f8", "predictions": "<f8"}[name]
        return np.frombuffer(bytes(getattr(self, name)), dtype=dtype)


class AuditItem(models.Model):
    """A member drawn into the sample, at its place in the order items are given out (`position`, from 0): the
    estimate counts the decided items at the head of that order."""

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="items")

    workspace_path = "audit__workspace"
    trajectory = models.ForeignKey("curation.Trajectory", on_delete=models.CASCADE, related_name="audit_items")
    position = models.PositiveIntegerField()
    inclusion_probability = models.FloatField()
    text_version = models.PositiveIntegerField(help_text="The trajectory's text version at the freeze.")
    prediction = models.FloatField(null=True, help_text="The judge's prediction of a rejection (null: none).")
    criteria = models.JSONField(
        default=dict, blank=True, help_text="The judge's predicted failure per criterion at the freeze."
    )

    class Meta:
        ordering = ["audit_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "position"], name="audit_item_position"),
            models.UniqueConstraint(fields=["audit", "trajectory"], name="audit_item_once"),
        ]
        indexes = [models.Index(fields=["trajectory", "audit"], name="audit_item_trajectory")]

    def __str__(self):
        return f"#{self.position} of audit {self.audit_id}: trajectory {self.trajectory_id}"


class Acceptance(models.Model):
    """One "accept the rest" on an audit's evidence: the bound and the ceiling it was allowed on, and the bulk
    decision (its batch; its job when it ran as one) that wrote the acceptances."""

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="acceptances")

    workspace_path = "audit__workspace"
    max_error_rate = models.FloatField()
    high = models.FloatField(help_text="The estimate's upper bound when it was allowed.")
    estimate = models.JSONField(default=dict)
    batch = models.UUIDField(null=True, blank=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    accepted = models.PositiveIntegerField(null=True, blank=True, help_text="Accepted in the request (no job).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"acceptance {self.pk} on audit {self.audit_id}"
