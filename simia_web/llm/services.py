"""Writing LLMCall rows: at once, or held while a job unit runs and written together when it ends.

A rollout makes several calls one after another; one INSERT at the end of the unit instead of one per
call saves database round trips, and on a busy worker every round trip gives up the GIL and waits
to get it back, which delays the other threads' requests too.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .models import LLMCall

_held: ContextVar[list[LLMCall] | None] = ContextVar("held_llm_calls", default=None)


def llm_call_record(call: LLMCall) -> LLMCall:
    """Save the call's row now, or hold it when inside `llm_calls_held` (its pk is set once written)."""
    held = _held.get()
    if held is None:
        call.save(force_insert=True)
    else:
        held.append(call)
    return call


def llm_call_mark_invalid(call: LLMCall, *, kind: str, problem: str) -> None:
    """An answer that arrived but could not be used (bad JSON, wrong schema)."""
    call.error, call.error_kind = problem[:4000], kind
    if call.pk is not None:
        LLMCall.objects.filter(pk=call.pk).update(error=call.error, error_kind=kind)


@contextmanager
def llm_calls_held() -> Iterator[list[LLMCall]]:
    """Hold the rows of the calls made inside; the caller writes them with `llm_calls_write`."""
    held: list[LLMCall] = []
    token = _held.set(held)
    try:
        yield held
    finally:
        _held.reset(token)


def llm_call_ids(calls: list[LLMCall]) -> list[int]:
    """The calls' row ids, for provenance: known once the rows are written."""
    ids = [call.pk for call in calls]
    if None in ids:
        raise RuntimeError("LLM call rows are held and not written yet: take their ids in the unit's writer")
    return ids


def llm_calls_write(calls: list[LLMCall]) -> None:
    """Write held rows in one INSERT; their pks are set afterwards."""
    if calls:
        LLMCall.objects.bulk_create(calls)
