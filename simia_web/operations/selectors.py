"""Reads for /metrics and the webhook pages. Every query here is bounded by something other than the data's size:
the number of series, the work of active jobs, one page of a delivery log."""

import json
from collections import defaultdict

from django.db.models import Count

from simia_web.accounts.scoping import scoped
from simia_web.jobs.models import ACTIVE_JOB_STATUSES, Job, JobUnit

from .models import DeliveryStatus, MetricCount, WebhookDelivery, WebhookSubscription

DELIVERIES_SHOWN = 50


def metric_counts() -> dict[str, list[tuple[dict, int]]]:
    """{metric: [(labels, total)]} of every stored counter series."""
    series = defaultdict(list)
    for metric, labels, value in MetricCount.objects.values_list("metric", "labels", "value").order_by(
        "metric", "labels"
    ):
        series[metric].append((json.loads(labels), value))
    return series


def active_job_counts() -> dict[str, int]:
    """{status: jobs} for the statuses a job is active in (zero included)."""
    counts: dict[str, int] = dict.fromkeys(ACTIVE_JOB_STATUSES, 0)
    counts.update(
        Job.objects.filter(status__in=ACTIVE_JOB_STATUSES).values_list("status").annotate(n=Count("id")).order_by()
    )
    return counts


def active_unit_counts() -> list[tuple[str, str, str, int]]:
    """[(kind, stage, status, units)] of the units of queued and running jobs: the work in flight."""
    units = JobUnit.objects.filter(job__status__in=ACTIVE_JOB_STATUSES)
    return list(units.values_list("job__kind", "stage", "status").annotate(n=Count("id")).order_by())


def pending_delivery_count() -> int:
    return WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).count()


def subscription_list(*, workspace_ids: list[int]):
    """The workspaces' webhook subscriptions."""
    return scoped(WebhookSubscription.objects.select_related("created_by"), workspace_ids)


def delivery_list(subscription: WebhookSubscription):
    """The subscription's deliveries, newest first (its index)."""
    return subscription.deliveries.order_by("-id")
