"""Items decided by consensus: an assignment batch with a rule (calibration.ConsensusRule) gives each of its items to
k annotators, whose answers are votes (Reviews of stage `vote`) until the votes on the item's current version meet
the rule or split past it (curation.services.consensus). The rule is open while no decision stands on the item."""

from django.conf import settings
from django.db import models

from .trajectory import Trajectory


class ConsensusItem(models.Model):
    trajectory = models.OneToOneField(Trajectory, on_delete=models.CASCADE, related_name="consensus")

    workspace_path = "trajectory__domain__workspace"
    rule = models.CharField(max_length=12, help_text="majority, unanimous or adjudicate (calibration.ConsensusRule).")
    overlap = models.PositiveSmallIntegerField(help_text="The votes the rule counts (k).")
    voters = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="+")
    # The assignment batch (calibration.AssignmentBatch, named by id: that app sits above this one) that set the rule.
    batch = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"consensus ({self.rule}, k={self.overlap}) on {self.trajectory_id}"
