"""What operations does when the apps below it say something happened: count it, and tell the webhooks.

Each receiver runs inside the transaction of the change it hears about, so counts and deliveries are written
with it or not at all.
"""

import functools
from collections import Counter

from django.db import transaction
from django.dispatch import receiver

from simia_web.accounts.models import owner_workspace_id
from simia_web.core.dispatch import task_send
from simia_web.curation.models import Trajectory
from simia_web.curation.signals import trajectory_statuses_changed
from simia_web.exports.models import Snapshot
from simia_web.exports.signals import snapshot_ready
from simia_web.jobs.models import JobStatus
from simia_web.jobs.selectors import job_progress
from simia_web.jobs.signals import job_ended, unit_leases_taken_back, watchdog_looked
from simia_web.llm.signals import llm_call_invalidated, llm_calls_recorded

from . import counters
from .models import WebhookEvent, WebhookSubscription
from .payloads import job_payload, snapshot_payload
from .services import webhook_deliveries_sweep, webhook_event_emit

REVIEW_MILESTONES_CHECK = "simia_web.operations.tasks.review_milestones_check"  # by name: it imports the services

JOB_EVENTS = {
    JobStatus.SUCCEEDED: WebhookEvent.JOB_FINISHED,
    JobStatus.FINISHED_WITH_ERRORS: WebhookEvent.JOB_FINISHED,
    JobStatus.FAILED: WebhookEvent.JOB_FAILED,
    JobStatus.CANCELLED: WebhookEvent.JOB_CANCELLED,
}


@receiver(llm_calls_recorded, dispatch_uid="operations-llm-calls")
def _llm_calls_recorded(sender, calls, **kwargs):
    counters.llm_calls_count(calls)


@receiver(llm_call_invalidated, dispatch_uid="operations-llm-invalid")
def _llm_call_invalidated(sender, call, kind, **kwargs):
    counters.llm_call_invalid_count(call, kind)


@receiver(job_ended, dispatch_uid="operations-job-ended")
def _job_ended(sender, job, **kwargs):
    units = job.summary["units"] if "units" in job.summary else _units_by_status(job)
    counters.job_end_count(job, units)
    webhook_event_emit(event=JOB_EVENTS[job.status], data=job_payload(job, units), workspace_id=job.workspace_id)


@receiver(unit_leases_taken_back, dispatch_uid="operations-unit-leases-taken-back")
def _unit_leases_taken_back(sender, job, units, **kwargs):
    series = counters.series_key(counters.UNIT_LEASES_TAKEN_BACK, kind=job.kind)
    counters.metric_counts_add(Counter({series: len(units)}))


@receiver(watchdog_looked, dispatch_uid="operations-webhook-sweep")
def _watchdog_looked(sender, now, **kwargs):
    webhook_deliveries_sweep(now=now)


@receiver(snapshot_ready, dispatch_uid="operations-snapshot-ready")
def _snapshot_ready(sender, snapshot_id, **kwargs):
    if _subscribed(WebhookEvent.SNAPSHOT_READY):
        snapshot = Snapshot.objects.select_related("job").get(pk=snapshot_id)
        webhook_event_emit(
            event=WebhookEvent.SNAPSHOT_READY,
            data=snapshot_payload(snapshot),
            workspace_id=owner_workspace_id(snapshot.job),
        )


@receiver(trajectory_statuses_changed, dispatch_uid="operations-review-milestones")
def _trajectory_statuses_changed(sender, trajectory_ids, **kwargs):
    """Milestones are counted by a worker after the commit, and only while someone subscribed to them."""
    if not _subscribed(WebhookEvent.REVIEW_MILESTONE):
        return
    jobs = Trajectory.objects.filter(pk__in=trajectory_ids, job__isnull=False).values_list("job_id", flat=True)
    for job_id in jobs.order_by().distinct():
        transaction.on_commit(functools.partial(task_send, REVIEW_MILESTONES_CHECK, (job_id,)), robust=True)


def _units_by_status(job) -> dict[str, int]:
    """{status: n} of a job that ended without a summary (cancelled, or its planning failed)."""
    units: dict[str, int] = {}
    for stage_counts in job_progress(job).values():
        for status, n in stage_counts.items():
            if status != "total" and n:
                units[status] = units.get(status, 0) + n
    return units


def _subscribed(event: str) -> bool:
    return any(
        event in events for events in WebhookSubscription.objects.filter(active=True).values_list("events", flat=True)
    )
