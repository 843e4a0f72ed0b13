from celery import shared_task

from simia_web.core.outages import through_outages

from . import services


@shared_task(acks_late=True, ignore_result=True)
def clusters_refresh(corpus: str, item_ids: list[int]) -> None:
    through_outages(
        lambda: services.clusters_refresh(corpus=corpus, item_ids=item_ids), what=f"clustering {corpus} items"
    )
