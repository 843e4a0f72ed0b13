"""The dashboard's first steps (connect an LLM, create or import a domain, queue a job, review items, export a
snapshot), each done or not. Cheap at any size: one EXISTS per step and the handful of endpoint profiles; once every
step is done that is remembered for a minute, so a busy dashboard asks nothing at all."""

from dataclasses import dataclass

from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
from django.core.cache import cache

from simia_web.catalog.models import Domain, DomainSource
from simia_web.curation.models import Review
from simia_web.jobs.models import Job, JobStatus
from simia_web.llm.selectors import endpoint_connected

# The job kind a snapshot is built by (registered by the exports app, which sits above this one).
EXPORT_KIND = "export"
_ALL_DONE_KEY = "first-steps-all-done"
_ALL_DONE_SECONDS = 60


@dataclass(frozen=True)
class FirstSteps:
    llm: bool
    domain: bool
    job: bool
    review: bool
    export: bool

    @property
    def all_done(self) -> bool:
        return self.llm and self.domain and self.job and self.review and self.export


def first_steps() -> FirstSteps:
    """Which first steps are done. The demo's domains and the demo reviewer's decisions (an account that cannot log
    in) are not anyone's first steps; an LLM counts as connected once a profile, as used now, passed its test."""
    if cache.get(_ALL_DONE_KEY):
        return FirstSteps(True, True, True, True, True)
    jobs = Job.objects.exclude(kind=EXPORT_KIND)
    steps = FirstSteps(
        llm=endpoint_connected(),
        domain=Domain.objects.exclude(source=DomainSource.DEMO).exists(),
        job=jobs.exists(),
        review=Review.objects.exclude(reviewer__password__startswith=UNUSABLE_PASSWORD_PREFIX).exists(),
        export=Job.objects.filter(kind=EXPORT_KIND, status=JobStatus.SUCCEEDED).exists(),
    )
    if steps.all_done:
        cache.set(_ALL_DONE_KEY, True, _ALL_DONE_SECONDS)
    return steps
