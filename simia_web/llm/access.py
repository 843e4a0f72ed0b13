"""Who may read an LLM call: prompts and answers can carry any job's data, so admins only, except that the
owner of an RL session reads the calls made for it."""

from datetime import timedelta

from simia_web.accounts.models import Role
from simia_web.environments.models import EnvSession

from .models import LLMCall

# A call's row can be written a little after the step's session row: allow for that when matching times.
_CLOCK_SLACK = timedelta(seconds=5)


def llm_call_visible(*, call: LLMCall, user) -> bool:
    if user.has_role(Role.ADMIN):
        return True
    # Only sessions open when the call was made can hold it; their id lists are read, not every session's.
    candidates = EnvSession.objects.filter(
        created_by=user,
        created_at__lte=call.created_at + _CLOCK_SLACK,
        updated_at__gte=call.created_at - _CLOCK_SLACK,
    ).values_list("llm_call_ids", flat=True)
    return any(call.pk in (ids or []) for ids in candidates)
