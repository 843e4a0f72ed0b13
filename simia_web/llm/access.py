"""Who may read an LLM call: prompts and answers can carry any job's data, so admins, and whoever an app
built on this one says may read it (environments: the owner of the RL session the call was made for).
Those apps register their rule when they load, so that this app imports none of them."""

from collections.abc import Callable

from simia_web.accounts.models import Role

from .models import LLMCall

CallReader = Callable[..., bool]  # reader(*, call, user) -> whether that user may read that call
_readers: list[CallReader] = []


def llm_call_reader_register(reader: CallReader) -> None:
    """Let `reader` grant reading calls to users other than admins (registered once, however often asked)."""
    if reader not in _readers:
        _readers.append(reader)


def llm_call_visible(*, call: LLMCall, user) -> bool:
    if user.has_role(Role.ADMIN):
        return True
    return any(reader(call=call, user=user) for reader in _readers)
