"""Counters for Prometheus kept by the writers, webhook subscriptions and their deliveries."""

import secrets

from django.conf import settings
from django.db import models

from simia_web.accounts.models import owner_workspace_field


class MetricCount(models.Model):
    """One series of a counter: a metric name, its labels (canonical JSON) and the total so far.

    Writers add to it in the transaction that writes what it counts (see services.metric_counts_add), so a
    scrape from any web process sees every worker machine's work, and reads as many rows as there are series,
    whatever the size of the data.
    """

    metric = models.CharField(max_length=64)
    labels = models.CharField(max_length=400)
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["metric", "labels"], name="metric_count_unique_series")]

    def __str__(self):
        return f"{self.metric}{self.labels} {self.value}"


class WebhookEvent(models.TextChoices):
    JOB_FINISHED = "job.finished", "Job finished (succeeded, or finished with errors)"
    JOB_FAILED = "job.failed", "Job failed"
    JOB_CANCELLED = "job.cancelled", "Job cancelled"
    SNAPSHOT_READY = "snapshot.ready", "Snapshot ready"
    REVIEW_MILESTONE = "review.milestone", "Review milestone (a share of a job's trajectories reviewed)"


# What "send test" delivers: every subscription receives it, whatever its events.
PING = "ping"


def webhook_secret() -> str:
    return f"whsec_{secrets.token_urlsafe(32)}"


class WebhookSubscription(models.Model):
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500, help_text="Where events are POSTed (http or https).")
    secret = models.CharField(max_length=100, default=webhook_secret, help_text="Signs every delivery (HMAC-SHA256).")
    # After a rotation, the secret before it also signs every delivery until `previous_secret_until`.
    previous_secret = models.CharField(max_length=100, blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    events = models.JSONField(default=list, help_text="The event types delivered here.")
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    workspace = owner_workspace_field()

    workspace_path = "workspace"

    class Meta:
        ordering = ["name", "id"]

    def __str__(self):
        return f"{self.name} → {self.url}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # waiting for its first or next attempt
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"  # every attempt failed


class WebhookDelivery(models.Model):
    """One event for one subscription, and how its attempts went (the last attempt's answer is kept)."""

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")

    workspace_path = "subscription__workspace"
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["subscription", "-id"]), models.Index(fields=["status"])]

    def __str__(self):
        return f"{self.event} → {self.subscription_id} {self.status}"


class ReviewMilestone(models.Model):
    """A share of a job's trajectories reached reviewed (accepted or rejected): announced once per job and share."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="review_milestones")

    workspace_path = "job__workspace"
    percent = models.PositiveSmallIntegerField()
    reached_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "percent"], name="review_milestone_once")]

    def __str__(self):
        return f"job {self.job_id} {self.percent}% reviewed"
