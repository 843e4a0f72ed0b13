from pathlib import Path

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import OperationalError

from . import services
from .broker_folder import outbox_watch

# The database out of reach (a connection pool exhausted, a restart) fails the task before the unit's own
# failure can be written: the task is sent again later, instead of its message being acknowledged as
# failed and the unit left pending until a worker restarts. Running a unit again is safe (written once).
_AGAIN_WHEN_THE_DATABASE_IS_AWAY = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": 1,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 20,
}


@shared_task(acks_late=True, ignore_result=True, **_AGAIN_WHEN_THE_DATABASE_IS_AWAY)
def job_start(job_id: int) -> None:
    services.job_start(job_id=job_id)


@shared_task(acks_late=True, ignore_result=True, **_AGAIN_WHEN_THE_DATABASE_IS_AWAY)
def unit_execute(unit_id: int, last_of_stage: bool = False) -> None:
    services.unit_execute(unit_id=unit_id, last_of_stage=last_of_stage)


@worker_ready.connect
def _on_worker_ready(**_kwargs):
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        outbox_watch(Path(options["data_folder_out"]), Path(options["data_folder_in"]))
    if settings.SIMIA_RECOVER_ON_WORKER_START:
        services.jobs_recover()
