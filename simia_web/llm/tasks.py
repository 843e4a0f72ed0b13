from celery import shared_task

from .capabilities import endpoint_check
from .models import EndpointProfile
from .selectors import profile_as_used_here


@shared_task(ignore_result=True)
def endpoint_check_run(profile_id: int) -> None:
    """Probe a profile in a worker: against a slow server the probe takes longer than a page request may."""
    profile = EndpointProfile.objects.filter(pk=profile_id).first()
    if profile is not None:
        endpoint_check(profile=profile_as_used_here(profile))
