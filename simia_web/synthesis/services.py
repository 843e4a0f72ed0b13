"""Queueing synthesis and rollout jobs: the one entry point for the CLI, the pages and the API."""

from django.core.exceptions import ValidationError
from django.db import transaction

from simia_web.catalog.models import Domain, DomainSource, TaskStatus
from simia_web.catalog.selectors import domain_unusable_reason
from simia_web.catalog.services import domain_ensure
from simia_web.jobs.models import Job, JobKind
from simia_web.jobs.services import job_create

LIMITS = {
    "apis": (1, 50),
    "tasks": (1, 500),
    "rollouts": (1, 64),
    "max_steps": (1, 100),
    "max_errors": (1, 50),
    "user_turns": (0, 20),
}


def _bounded(params: dict, name: str, default: int) -> int:
    value = params.get(name, default)
    low, high = LIMITS[name]
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValidationError({name: f"must be a whole number from {low} to {high}"})
    return value


def _run_options(params: dict) -> dict:
    return {
        "max_steps": _bounded(params, "max_steps", 12),
        "max_errors": _bounded(params, "max_errors", 3),
        "user_turns": _bounded(params, "user_turns", 0),
        "profiles": {k: int(v) for k, v in (params.get("profiles") or {}).items() if v},
    }


@transaction.atomic
def synthesis_queue(
    *,
    domains: list[str],
    apis: int,
    tasks: int,
    rollouts: int,
    actor=None,
    description: str = "",
    policy: str = "",
    **options,
) -> Job:
    """Queue APIs, tasks and rollouts for each domain; new domains get the description and policy given."""
    names = [d.strip() for d in domains if d and d.strip()]
    if not names:
        raise ValidationError({"domains": "name at least one domain"})
    for name in names:
        try:
            Domain._meta.get_field("name").run_validators(name)
        except ValidationError as exc:
            raise ValidationError({"domains": f"{name!r}: {' '.join(exc.messages)}"}) from exc
    params = {
        "domains": names,
        "apis": _bounded({"apis": apis}, "apis", 8),
        "tasks": _bounded({"tasks": tasks}, "tasks", 10),
        "rollouts": _bounded({"rollouts": rollouts}, "rollouts", 1),
        **_run_options(options),
    }
    for name in names:
        domain_ensure(name=name, description=description, policy=policy, source=DomainSource.SYNTHESIZED, actor=actor)
    return job_create(kind=JobKind.SYNTHESIZE, params=params, actor=actor)


def rollout_queue(*, domain: str, rollouts: int, tasks: int | None = None, actor=None, **options) -> Job:
    found = Domain.objects.filter(name=domain).first()
    if found is None:
        raise ValidationError({"domain": f"no domain named {domain!r}"})
    if reason := domain_unusable_reason(found):
        raise ValidationError({"domain": reason})
    if not found.tasks.filter(status=TaskStatus.VALID).exists():
        raise ValidationError({"domain": f"{domain} has no valid task to roll out"})
    params = {"domain": domain, "rollouts": _bounded({"rollouts": rollouts}, "rollouts", 1), **_run_options(options)}
    if tasks is not None:
        params["tasks"] = _bounded({"tasks": tasks}, "tasks", 10)
    return job_create(kind=JobKind.ROLLOUT, params=params, actor=actor)
