"""The dashboard's first steps in a workspace (connect an LLM, create or import a domain, queue a job, review items,
export a snapshot), each done or not: the endpoints are the deployment's, the rest the workspace's own. Cheap at any
size: one EXISTS per step (decisions read from the rollups) and the handful of endpoint profiles; once every step
is done that is remembered for a minute, so a busy dashboard asks nothing at all."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
from django.core.cache import cache

from simia_web.accounts.models import User
from simia_web.accounts.scoping import scoped
from simia_web.catalog.models import Domain, DomainSource
from simia_web.curation.models import Figure
from simia_web.curation.selectors.rollups import rollup_rows
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


def first_steps(*, workspace_ids: Iterable[int]) -> FirstSteps:
    """Which first steps the workspaces have done. The demo's domains and the demo reviewer's decisions (an account
    that cannot log in) are not anyone's first steps; an LLM counts as connected once a profile, as used now, passed
    its test."""
    workspace_ids = sorted(workspace_ids)
    done_key = f"{_ALL_DONE_KEY}:{','.join(map(str, workspace_ids))}"
    if cache.get(done_key):
        return FirstSteps(True, True, True, True, True)
    jobs = scoped(Job.objects.all(), workspace_ids)
    steps = FirstSteps(
        llm=endpoint_connected(),
        domain=scoped(Domain.objects.exclude(source=DomainSource.DEMO), workspace_ids).exists(),
        job=jobs.exclude(kind=EXPORT_KIND).exists(),
        review=rollup_rows(Figure.DECISIONS, workspace_ids=workspace_ids)
        .exclude(reviewer__in=User.objects.filter(password__startswith=UNUSABLE_PASSWORD_PREFIX).values("pk"))
        .exists(),
        export=jobs.filter(kind=EXPORT_KIND, status=JobStatus.SUCCEEDED).exists(),
    )
    if steps.all_done:
        cache.set(done_key, True, _ALL_DONE_SECONDS)
    return steps
