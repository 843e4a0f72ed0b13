"""What the exports app does when the job engine tells it something: a snapshot job that ends leaves no parts and no
temporary folders."""

from django.db import transaction
from django.dispatch import receiver

from simia_web.jobs.signals import job_ended

from .models import Snapshot
from .services import EXPORT, snapshot_leftovers_remove


@receiver(job_ended, dispatch_uid="exports-job-ended")
def _job_ended(sender, job, **kwargs):
    """Remove what an ended export job leaves (cancelled, failed or built), once the end is committed."""
    if job.kind != EXPORT:
        return
    snapshot = Snapshot.objects.filter(job=job).first()
    if snapshot is not None:
        transaction.on_commit(lambda: snapshot_leftovers_remove(snapshot=snapshot))
