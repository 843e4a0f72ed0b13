from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from . import services


@shared_task(acks_late=True, ignore_result=True)
def job_start(job_id: int) -> None:
    services.job_start(job_id=job_id)


@shared_task(acks_late=True, ignore_result=True)
def unit_execute(unit_id: int, last_of_stage: bool = False) -> None:
    services.unit_execute(unit_id=unit_id, last_of_stage=last_of_stage)


@worker_ready.connect
def _recover_on_start(**_kwargs):
    if settings.SIMIA_RECOVER_ON_WORKER_START:
        services.jobs_recover()
