from django.db.models import Count

from simia_web.catalog.models import Api, Domain, Seed, Task, TaskStatus
from simia_web.curation.models import Trajectory
from simia_web.jobs.models import Job


def stats() -> dict:
    return {
        "domains": Domain.objects.count(),
        "apis": Api.objects.filter(valid=True).count(),
        "tasks": Task.objects.count(),
        "seeds": Seed.objects.count(),
        "trajectories": dict(Trajectory.objects.values_list("status").annotate(n=Count("id")).order_by()),
        "jobs": dict(Job.objects.values_list("status").annotate(n=Count("id")).order_by()),
    }


def valid_task_count(*, domain_name: str) -> int:
    return Task.objects.filter(domain__name=domain_name, status=TaskStatus.VALID).count()
