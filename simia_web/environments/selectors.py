"""Reads for RL environment sessions: those of the workspaces a request reads from (`workspace_ids`); another
workspace's session is not there to be found."""

from collections.abc import Iterable
from datetime import timedelta

from django.db.models import Q, QuerySet

from simia_web.accounts.models import Membership, Role
from simia_web.accounts.scoping import scoped
from simia_web.catalog.models import Api, Domain, Task, TaskStatus

from .models import EnvGroup, EnvSession


def task_in(*, task_id: int, workspace_ids: Iterable[int]) -> Task | None:
    """The task `task_id` with its domain if one of the workspaces owns it, else None (as a missing one)."""
    return scoped(Task.objects.select_related("domain"), workspace_ids).filter(pk=task_id).first()


def domain_in(*, name: str, workspace_ids: Iterable[int]) -> Domain | None:
    """The domain `name` if one of the workspaces owns it, else None (as a missing one)."""
    return scoped(Domain.objects.all(), workspace_ids).filter(name=name).first()


def group_keyed(key: str) -> EnvGroup | None:
    """The group `key` whichever workspace it plays in (keys are unique across workspaces), with its task."""
    return EnvGroup.objects.select_related("task__domain").filter(key=key).first()


def playable_task_ids(*, domain: Domain) -> list[int]:
    """Ids of the tasks a session may be started on, in a stable order (so a seed picks reproducibly)."""
    return list(Task.objects.filter(domain=domain, status=TaskStatus.VALID).order_by("id").values_list("id", flat=True))


def domain_apis(*, domain: Domain) -> list[Api]:
    return list(Api.objects.filter(domain=domain, valid=True).order_by("name", "id"))


def sessions_visible(*, actor, workspace_ids: Iterable[int]) -> QuerySet[EnvSession]:
    """The sessions of the workspaces that the actor may see: in a workspace they administer, every session; in
    the others, their own."""
    sessions = scoped(EnvSession.objects.select_related("domain", "task", "group"), workspace_ids)
    if actor.is_site_admin:
        return sessions
    administered = Membership.objects.filter(user=actor, role=Role.ADMIN).values("workspace_id")
    return sessions.filter(Q(created_by=actor) | Q(domain__workspace_id__in=administered))


# The conversation and state snapshots: not needed to list sessions, and they grow with every step.
HEAVY_FIELDS = ("tools", "api_specs", "initial_state", "state", "messages", "steps", "llm_call_ids")


def sessions_list(*, actor, workspace_ids: Iterable[int]) -> QuerySet[EnvSession]:
    """The sessions the actor may see in the workspaces, without the heavy JSON columns, for a summary listing."""
    return sessions_visible(actor=actor, workspace_ids=workspace_ids).defer(*HEAVY_FIELDS)


# What a step reads of the session's domain, task and group: not the domain's world state (a step works on
# the session's copy, and a τ² domain's state is over a megabyte), nor the other JSON columns.
STEP_RELATED_FIELDS = (
    "domain__name",
    "domain__workspace_id",
    "domain__policy",
    "domain__state_schema",
    "task__instruction",
    "task__expected_outcome",
    "task__user_scenario",
    "group__key",
)


def session_for_step(*, session_id, actor, workspace_ids: Iterable[int]) -> EnvSession | None:
    """The session a step runs on, with what the step reads of its domain, task and group; None when the
    actor may not see it in the workspaces."""
    sessions = sessions_visible(actor=actor, workspace_ids=workspace_ids)
    own = [f.name for f in EnvSession._meta.concrete_fields]
    try:
        return sessions.only(*own, *STEP_RELATED_FIELDS).get(pk=session_id)
    except EnvSession.DoesNotExist:
        return None


# A call's row can be written a little after the step's session row: allow for that when matching times.
_CALL_CLOCK_SLACK = timedelta(seconds=5)


def llm_call_in_own_session(*, call, user) -> bool:
    """Whether `user` owns an RL session the LLM call was made for (they may read it; see llm.access)."""
    # Only sessions open when the call was made can hold it; their id lists are read, not every session's.
    candidates = EnvSession.objects.filter(
        created_by=user,
        created_at__lte=call.created_at + _CALL_CLOCK_SLACK,
        updated_at__gte=call.created_at - _CALL_CLOCK_SLACK,
    ).values_list("llm_call_ids", flat=True)
    return any(call.pk in (ids or []) for ids in candidates)
