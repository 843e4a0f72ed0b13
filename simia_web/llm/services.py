"""Writing LLMCall rows: at once, or held while a job unit runs and written together when it ends.

A rollout makes several calls one after another; one INSERT at the end of the unit instead of one per
call saves database round trips, and on a busy worker every round trip gives up the GIL and waits
to get it back, which delays the other threads' requests too.
"""

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .models import LLMCall
from .slots import Rank, first_come

_held: ContextVar[list[LLMCall] | None] = ContextVar("held_llm_calls", default=None)
_held_job: ContextVar[int | None] = ContextVar("held_llm_calls_job", default=None)
# Jobs of which this process has seen the last unit start, oldest first (a bounded ordered set).
_finishing_jobs: dict[int, None] = {}
_FINISHING_JOBS_KEPT = 1000
_FINISHING = -1_000_000  # a finishing job's units go before every other job's


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
def llm_calls_held(*, job_id: int | None = None) -> Iterator[list[LLMCall]]:
    """Hold the rows of the calls made inside (by a unit of `job_id`); write them with `llm_calls_write`."""
    held: list[LLMCall] = []
    token, job_token = _held.set(held), _held_job.set(job_id)
    try:
        yield held
    finally:
        _held.reset(token)
        _held_job.reset(job_token)


def llm_job_finishing(job_id: int) -> None:
    """The job has no unit left to start: from now on its units here get the endpoint fewest-calls-first."""
    _finishing_jobs[job_id] = None
    while len(_finishing_jobs) > _FINISHING_JOBS_KEPT:
        del _finishing_jobs[next(iter(_finishing_jobs))]


def llm_slot_rank() -> Rank:
    """How soon the running code gets a concurrency slot when it has to wait for one (lower is sooner).

    First come, first served, except for the units of a finishing job: they go first, the unit with
    the fewest calls so far (most likely the most still to make) before the others, so that the
    job's last units end together instead of one after another. The rank is read whenever a slot is
    handed out, so units already waiting when their job starts finishing are reordered too.
    """
    job_id = _held_job.get()
    if job_id is None:
        return first_come
    return functools.partial(_unit_rank, job_id, _held.get())


def _unit_rank(job_id: int, calls: list[LLMCall]) -> int:
    return _FINISHING + len(calls) if job_id in _finishing_jobs else 0


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
