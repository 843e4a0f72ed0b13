from celery import shared_task

from simia_web.core.outages import through_outages

from . import services

# No Celery retries: the service schedules each next attempt itself, with its backoff, and waits out outages.


@shared_task(acks_late=True, ignore_result=True)
def webhook_deliver(delivery_id: int, attempt: int) -> None:
    services.webhook_delivery_attempt(delivery_id=delivery_id, attempt=attempt)


@shared_task(acks_late=True, ignore_result=True)
def review_milestones_check(job_id: int) -> None:
    through_outages(lambda: services.review_milestones_check(job_id=job_id), what=f"job {job_id}'s review milestones")
