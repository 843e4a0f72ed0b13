"""Jobs and their units: what was asked (kind, parameters), how far it got, and which worker holds each unit."""

from django.conf import settings
from django.db import models

from simia_web.accounts.models import owner_workspace_field

from .kinds import KIND_MAX_LENGTH, STAGE_MAX_LENGTH, job_kind_choices


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    # It made what it was for, but some units failed, or some of what it made was cut short or left unjudged.
    FINISHED_WITH_ERRORS = "finished_with_errors", "Finished with errors"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)


class Job(models.Model):
    kind = models.CharField(max_length=KIND_MAX_LENGTH, choices=job_kind_choices)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=24, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    stage = models.CharField(max_length=STAGE_MAX_LENGTH, blank=True)
    error = models.TextField(blank=True)
    summary = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    workspace = owner_workspace_field()

    workspace_path = "workspace"

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"job {self.pk} {self.kind} {self.status}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_JOB_STATUSES


class UnitStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class JobUnit(models.Model):
    """One planned piece of work (a domain, a task, a rollout). Its key makes redelivery harmless.

    While pending, a unit's message is in the broker, or held by a worker, or lost. `dispatched_at` says
    when it was last sent; a worker holding it (running it, or with it queued for its threads) keeps a
    lease on it, renewed by that worker's heartbeat (see jobs.watchdog), and only the lease's holder may
    start it while the lease lasts (or a process of the pool it forked, see jobs.leases). A lease the watchdog took
    back from a holder that kept it without starting the unit names that holder in `lease_taken_from`, whose
    heartbeat then renews it no more (a run of it may still claim it, as any worker's may).

    `progress` is how far a long unit's run has got, as it reported it (see jobs.leases.unit_progress):
    {"done", "total", "what", "doing"}, written by its worker's heartbeat; {} for a unit that reports none.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="units")

    workspace_path = "job__workspace"
    stage = models.CharField(max_length=STAGE_MAX_LENGTH)
    key = models.CharField(max_length=200)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=UnitStatus.choices, default=UnitStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    lease_holder = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    lease_taken_from = models.CharField(max_length=200, blank=True)
    progress = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["job", "key"], name="unit_unique_key")]
        indexes = [models.Index(fields=["job", "stage", "status"])]

    def __str__(self):
        return f"{self.job_id}:{self.key} {self.status}"


class WatchdogTurn(models.Model):
    """When the job watchdog last looked for lost work, and which worker did: one worker a beat looks.

    `probes` holds the latest probes that came back through the broker's queue: [sent, seen] as epoch
    seconds (see jobs.services.jobs_heal).
    """

    name = models.CharField(max_length=32, primary_key=True)
    looked_at = models.DateTimeField()
    looked_by = models.CharField(max_length=200, blank=True)
    probes = models.JSONField(default=list, blank=True)

    def __str__(self):
        return f"{self.name} at {self.looked_at} by {self.looked_by}"
