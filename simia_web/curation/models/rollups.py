"""The counts kept with every write that changes them, so pages read a few rows rather than every trajectory."""

from datetime import date

from django.db import models


class Figure(models.TextChoices):
    """What a rollup row counts (curation.rollups says which facts of a trajectory add to which)."""

    STATUS = "status", "trajectories by status"
    VERDICT = "verdict", "trajectories by the judge's verdict"
    SCORE = "score", "trajectories by judge score bin"
    AGREEMENT = "agreement", "individually decided trajectories by judge verdict and decision"
    BULK_ONLY = "bulk_only", "trajectories decided only in bulk"
    AGREEMENT_DAY = "agreement_day", "individual decisions by day, agreeing with the judge or not"
    CRITERION_ACCEPTED = "criterion_accepted", "criterion scores of individually accepted trajectories"
    CRITERION_REJECTED = "criterion_rejected", "criterion scores of individually rejected trajectories"
    DECISIONS = "decisions", "decisions not undone by reviewer and day"
    VIOLATION = "violation", "trajectories by the code of a rule they break (unfixed)"
    SECOND_LOOK = "second_look", "annotators' decisions settled by a reviewer, by annotator and outcome"


# The day of a rollup row whose figure is not by day (the key's columns are never null, so an upsert finds the row).
UNDATED = date(1970, 1, 1)


class Rollup(models.Model):
    """A count (and a sum, for means) of the trajectories that share a key: kept by the writes that change it, so the
    dashboard and the agreement page read these rows rather than every trajectory.

    `job`, `profile` and `reviewer` are plain ids, 0 for none or where the figure does not count by them: the key's
    columns are never null, as an upsert only finds a row whose key is equal, and NULL never is. Deleting a job or
    a judge profile leaves its rows under its old id until `manage.py rebuild_rollups`.
    """

    figure = models.CharField(max_length=24, choices=Figure.choices)
    domain = models.ForeignKey("catalog.Domain", on_delete=models.CASCADE, related_name="+")

    workspace_path = "domain__workspace"
    job = models.PositiveIntegerField(default=0)
    profile = models.PositiveIntegerField(default=0)
    reviewer = models.PositiveIntegerField(default=0)
    day = models.DateField(default=UNDATED)
    label = models.CharField(max_length=100, blank=True)
    n = models.BigIntegerField(default=0)
    total = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["figure", "domain", "job", "profile", "reviewer", "day", "label"], name="rollup_key"
            )
        ]

    def __str__(self):
        return f"{self.figure} {self.label} = {self.n}"
