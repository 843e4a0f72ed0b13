from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from . import services


@shared_task(acks_late=True, ignore_result=True)
def job_start(job_id: int) -> None:
    services.job_start(job_id=job_id)


@shared_task(acks_late=True, ignore_result=True)
def unit_execute(unit_id: int) -> None:
    services.unit_execute(unit_id=unit_id)


@worker_ready.connect
def _recover_on_start(**_kwargs):
    if settings.SIMIA_RECOVER_ON_WORKER_START:
        services.jobs_recover()
