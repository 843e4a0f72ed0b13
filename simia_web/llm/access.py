"""Who may read an LLM call: prompts and answers can carry any job's data, so admins, and whoever an app
built on this one says may read it (environments: the owner of the RL session the call was made for).
Those apps register their rule when they load, so that this app imports none of them."""

from collections.abc import Callable

from simia_web.accounts.models import Role, owner_workspace_id

from .models import LLMCall

CallReader = Callable[..., bool]  # reader(*, call, user) -> whether that user may read that call
_readers: list[CallReader] = []


def llm_call_reader_register(reader: CallReader) -> None:
    """Let `reader` grant reading calls to users other than admins (registered once, however often asked)."""
    if reader not in _readers:
        _readers.append(reader)


def llm_call_visible(*, call: LLMCall, user) -> bool:
    """A job's call: the admins of the job's workspace (the one they work in). A call of no job (an endpoint test,
    an RL session's turn): site administrators, and whoever a registered reader names."""
    if call.job_id is not None:
        return owner_workspace_id(call.job) == user.current_workspace_id and user.has_role(Role.ADMIN)
    if user.is_site_admin:
        return True
    return any(reader(call=call, user=user) for reader in _readers)
