from django.db.models import Count, QuerySet

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


def valid_task_count(*, domain_name: str, workspace_id: int) -> int:
    """The valid tasks of the workspace's domain `domain_name` (none for another workspace's)."""
    return Task.objects.filter(
        domain__name=domain_name, domain__workspace_id=workspace_id, status=TaskStatus.VALID
    ).count()


def valid_tasks_of(*, domain_name: str, workspace_id: int) -> QuerySet[Task]:
    """The valid tasks of the workspace's domain `domain_name`, oldest first, as a rollout job plans them."""
    return Task.objects.filter(
        domain__name=domain_name, domain__workspace_id=workspace_id, status=TaskStatus.VALID
    ).order_by("id")
