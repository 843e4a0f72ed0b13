"""Gold items: trajectories a curator gave a known answer, mixed into annotators' work to measure each annotator
against it. An annotator's decision on a gold item is kept as their answer (a Review with stage `gold`) and leaves
the item as it was, so every annotator meets the same item, and nothing tells it apart until it is decided."""

from django.conf import settings
from django.db import models

from .trajectory import Trajectory


class GoldItem(models.Model):
    trajectory = models.OneToOneField(Trajectory, on_delete=models.CASCADE, related_name="gold")

    workspace_path = "trajectory__domain__workspace"
    expected_decision = models.CharField(max_length=16, choices=[("accept", "Accept"), ("reject", "Reject")])
    # {criterion: grade} on the judge's scale (simulation.judge), for the criteria the curator rated; may be empty.
    expected_scores = models.JSONField(default=dict, blank=True)
    explanation = models.TextField(blank=True, help_text="Shown to the annotator once they have decided.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"gold {self.trajectory_id}: {self.expected_decision}"
