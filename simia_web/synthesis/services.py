"""Queueing synthesis, rollout and amplification jobs.

Every way in (`manage.py queue`, the queue pages, the API, and the *_queue functions here for Python callers) goes
through jobs.services.job_queue: the kind's serializer (in its module of synthesis.job_kinds) checks the ranges and
caps, then one of the *_job_create functions applies the rules that need the database and writes the job.

A job works in one workspace (`workspace_id`, the `default` one when None): the domains and seeds its parameters
name are looked up there (another workspace's is refused as a missing one), and what it makes is that workspace's.
"""

import secrets

from django.db import transaction

from simia_web.catalog.models import Domain, DomainReference, DomainSource, Seed, TaskStatus
from simia_web.catalog.selectors import domain_unusable_reason
from simia_web.catalog.services import domain_ensure, workspace_id_or_default
from simia_web.core.errors import ValidationFailed
from simia_web.formats.rules import NEAR_DUPLICATE_THRESHOLD
from simia_web.jobs.models import Job
from simia_web.jobs.services import job_create, job_queue

SYNTHESIZE = "synthesize"
ROLLOUT = "rollout"
AMPLIFY = "amplify"
# What answers a rollout's tool calls: the LLM simulator, or the domain's reference environment (real responses).
SIMULATOR, REFERENCE = "simulator", "reference"
ENVIRONMENTS = (SIMULATOR, REFERENCE)


def synthesis_queue(*, actor=None, workspace=None, **params) -> Job:
    """Queue a synthesize job (parameters: synthesis.job_kinds.synthesize.SynthesizeJobSerializer)."""
    return job_queue(kind=SYNTHESIZE, params=params, actor=actor, workspace=workspace)


def rollout_queue(*, actor=None, workspace=None, **params) -> Job:
    """Queue a rollout job (parameters: synthesis.job_kinds.rollout.RolloutJobSerializer)."""
    return job_queue(kind=ROLLOUT, params=params, actor=actor, workspace=workspace)


def amplification_queue(*, actor=None, workspace=None, **params) -> Job:
    """Queue an amplify job (parameters: synthesis.job_kinds.amplify.AmplifyJobSerializer)."""
    return job_queue(kind=AMPLIFY, params=params, actor=actor, workspace=workspace)


def _domain_of(name: str, workspace_id: int) -> Domain:
    """The domain `name` of the workspace; another workspace's domain is refused as a missing one."""
    found = Domain.objects.filter(name=name, workspace_id=workspace_id).first()
    if found is None:
        raise ValidationFailed(f"no domain named {name!r}", field="domain")
    return found


@transaction.atomic
def synthesis_job_create(
    *,
    domains: list[str],
    apis: int,
    tasks: int,
    rollouts: int,
    max_steps: int,
    max_errors: int,
    user_turns: int,
    description: str = "",
    policy: str = "",
    profiles: dict | None = None,
    judge_prompt: str | None = None,
    workspace_id: int | None = None,
    actor=None,
) -> Job:
    """Queue APIs, tasks and rollouts for each domain of the workspace; new domains get the description and policy
    given. A name another workspace's domain has is refused (without saying more)."""
    workspace_id = workspace_id_or_default(workspace_id)
    params = {
        "domains": domains,
        "apis": apis,
        "tasks": tasks,
        "rollouts": rollouts,
        "max_steps": max_steps,
        "max_errors": max_errors,
        "user_turns": user_turns,
        "profiles": profiles or {},
        **({"judge_prompt": judge_prompt} if judge_prompt else {}),
    }
    for name in domains:
        domain_ensure(
            name=name,
            description=description,
            policy=policy,
            source=DomainSource.SYNTHESIZED,
            workspace_id=workspace_id,
            actor=actor,
        )
    return job_create(kind=SYNTHESIZE, params=params, actor=actor, workspace_id=workspace_id)


def rollout_job_create(
    *,
    domain: str,
    rollouts: int,
    max_steps: int,
    max_errors: int,
    user_turns: int,
    tasks: int | None = None,
    profiles: dict | None = None,
    environment: str = SIMULATOR,
    judge_prompt: str | None = None,
    workspace_id: int | None = None,
    actor=None,
) -> Job:
    """Queue rollouts of the valid tasks of a domain of the workspace."""
    workspace_id = workspace_id_or_default(workspace_id)
    found = _domain_of(domain, workspace_id)
    if reason := domain_unusable_reason(found):
        raise ValidationFailed(reason, field="domain")
    if environment == REFERENCE and not DomainReference.objects.filter(domain=found).exists():
        raise ValidationFailed(f"{domain} has no reference environment: name one on its page", field="environment")
    if not found.tasks.filter(status=TaskStatus.VALID).exists():
        raise ValidationFailed(f"{domain} has no valid task to roll out", field="domain")
    params = {
        "domain": domain,
        "rollouts": rollouts,
        "max_steps": max_steps,
        "max_errors": max_errors,
        "user_turns": user_turns,
        "profiles": profiles or {},
        "environment": environment,
        **({"judge_prompt": judge_prompt} if judge_prompt else {}),
    }
    if tasks is not None:
        params["tasks"] = tasks
    return job_create(kind=ROLLOUT, params=params, actor=actor, workspace_id=workspace_id)


def amplification_job_create(
    *,
    count: int,
    strategy: str,
    min_messages: int,
    max_messages: int,
    domain: str | None = None,
    seed_ids: list[int] | None = None,
    rng_seed: int | None = None,
    profiles: dict | None = None,
    judge_prompt: str | None = None,
    workspace_id: int | None = None,
    actor=None,
) -> Job:
    """Queue a job writing exactly `count` trajectories from the usable seeds of the workspace selected; another
    workspace's seed is refused as a missing one."""
    workspace_id = workspace_id_or_default(workspace_id)
    workspace_seeds = Seed.objects.filter(domain__workspace_id=workspace_id)
    seeds = workspace_seeds.filter(usable=True)
    if domain:
        seeds = seeds.filter(domain=_domain_of(domain, workspace_id))
    if seed_ids:
        found = set(workspace_seeds.filter(pk__in=seed_ids).values_list("id", "usable"))
        missing = sorted(set(seed_ids) - {pk for pk, _ in found})
        if missing:
            raise ValidationFailed(f"no seed with id {', '.join(map(str, missing))}", field="seed")
        unusable = sorted(pk for pk, usable in found if not usable)
        if unusable:
            raise ValidationFailed(
                f"seeds {', '.join(map(str, unusable))} fail the rules (see their problems)", field="seed"
            )
        seeds = seeds.filter(pk__in=seed_ids)
    seed_domains = dict(seeds.order_by("id").values_list("id", "domain_id"))
    chosen = list(seed_domains)
    if not chosen:
        raise ValidationFailed("no usable seed matches; import seeds first or fix their problems", field="seed")
    if strategy == "random" and rng_seed is None:
        rng_seed = secrets.randbelow(2**32)
    params = {
        "count": count,
        "domain": domain,
        "seeds": chosen,
        # Lets an output whose seed is deleted before it runs still be stored under the right domain.
        "seed_domains": {str(pk): domain_id for pk, domain_id in seed_domains.items()},
        "strategy": strategy,
        "rng_seed": rng_seed,
        "min_messages": min_messages,
        "max_messages": max_messages,
        "near_duplicate": NEAR_DUPLICATE_THRESHOLD,
        "profiles": profiles or {},
        **({"judge_prompt": judge_prompt} if judge_prompt else {}),
    }
    with transaction.atomic():
        return job_create(kind=AMPLIFY, params=params, actor=actor, workspace_id=workspace_id)
