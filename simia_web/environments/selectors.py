"""Reads for RL environment sessions."""

from datetime import timedelta

from django.db.models import QuerySet

from simia_web.catalog.models import Api, Domain, Task, TaskStatus

from .models import EnvSession


def playable_task_ids(*, domain: Domain) -> list[int]:
    """Ids of the tasks a session may be started on, in a stable order (so a seed picks reproducibly)."""
    return list(Task.objects.filter(domain=domain, status=TaskStatus.VALID).order_by("id").values_list("id", flat=True))


def domain_apis(*, domain: Domain) -> list[Api]:
    return list(Api.objects.filter(domain=domain, valid=True).order_by("name", "id"))


def sessions_visible(*, actor) -> QuerySet[EnvSession]:
    """Admins see every session; everyone else only their own."""
    sessions = EnvSession.objects.select_related("domain", "task", "group")
    if actor.has_role("admin"):
        return sessions
    return sessions.filter(created_by=actor)


# The conversation and state snapshots: not needed to list sessions, and they grow with every step.
HEAVY_FIELDS = ("tools", "api_specs", "initial_state", "state", "messages", "steps", "llm_call_ids")


def sessions_list(*, actor) -> QuerySet[EnvSession]:
    """The sessions the actor may see, without the heavy JSON columns, for a summary listing."""
    return sessions_visible(actor=actor).defer(*HEAVY_FIELDS)


# What a step reads of the session's domain, task and group: not the domain's world state (a step works on
# the session's copy, and a τ² domain's state is over a megabyte), nor the other JSON columns.
STEP_RELATED_FIELDS = (
    "domain__name",
    "domain__policy",
    "domain__state_schema",
    "task__instruction",
    "task__expected_outcome",
    "task__user_scenario",
    "group__key",
)


def session_for_step(*, session_id, actor) -> EnvSession | None:
    """The session a step runs on, with what the step reads of its domain, task and group; None when the
    actor may not see it."""
    sessions = sessions_visible(actor=actor)
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
