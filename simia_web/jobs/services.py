"""Job lifecycle: create, plan stages, execute units exactly once, advance, cancel, recover."""

import logging
import traceback

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from simia_web.core.services import audit_record
from simia_web.llm.services import llm_calls_held, llm_calls_write, llm_job_finishing

from . import unit_rows
from .models import Job, JobStatus, JobUnit, UnitStatus
from .pipelines import pipeline_for, queueable_pipelines

logger = logging.getLogger(__name__)


class JobError(Exception):
    pass


# Messages sent to Redis per round trip. Building one takes ~0.15-0.3 ms of CPU and holds the GIL: in one
# batch of a whole stage, the worker that plans it could not take the stage's first messages, nor start
# their units, until the last was built (its first unit started 150 ms after the job). Between batches the
# sending thread waits on Redis and the worker's other threads run.
PUBLISH_BATCH = 32


def _enqueue_units(unit_ids: list[int], *, whole_stage: bool = False) -> None:
    """Send one message per unit, PUBLISH_BATCH to a Redis round trip.

    When the ids are a whole stage, the last message says so: the worker that starts it knows that the
    stage has no unit left to start (see llm_job_finishing).
    """
    from .tasks import unit_execute

    last = unit_ids[-1] if whole_stage and unit_ids else None
    with unit_execute.app.producer_or_acquire() as producer, producer.batch(max_size=PUBLISH_BATCH):
        for position, unit_id in enumerate(unit_ids):
            kwargs = {"last_of_stage": True} if unit_id == last else {}
            # The first message declares the queue on this connection; Celery would check that again for
            # each of the others (a copy of the queue entity each, a quarter of a message's CPU).
            declare = None if position == 0 else []
            unit_execute.apply_async((unit_id,), kwargs, producer=producer, declare=declare)


def job_create(*, kind: str, params: dict, actor=None) -> Job:
    """Write a job whose parameters its kind has checked (see job_queue) and start it after the commit."""
    from .tasks import job_start

    pipeline_for(kind)  # unknown kinds fail here, before anything is written
    with transaction.atomic():
        job = Job.objects.create(kind=kind, params=params, created_by=actor if getattr(actor, "pk", None) else None)
        audit_record(actor=actor, action="job.create", target=job, data={"kind": kind, "params": params})
        transaction.on_commit(lambda: job_start.delay(job.pk))
    return job


def job_queue(*, kind: str, params: dict, actor=None) -> Job:
    """Queue a job of a registered kind, the one way the commands, the queue pages and the API do it.

    The kind's parameters serializer checks the ranges and caps and its save() queues the job, so a refused
    job writes nothing. Raises ValidationError with the refusals per parameter.
    """
    pipeline = queueable_pipelines().get(kind) if isinstance(kind, str) else None
    if pipeline is None:
        raise ValidationError({"kind": [f"choose one of {', '.join(queueable_pipelines())}"]})
    parameters = pipeline.parameters(data=params)
    if not parameters.is_valid():
        raise ValidationError({name: list(_error_lines(errors)) for name, errors in parameters.errors.items()})
    return parameters.save(actor=actor)


def _error_lines(errors, prefix: str = ""):
    """A serializer's nested errors as lines; an item's error says which item ("item 2: ...")."""
    if isinstance(errors, dict):
        for key, nested in errors.items():
            yield from _error_lines(nested, f"{prefix}item {key + 1}: " if isinstance(key, int) else f"{prefix}{key}: ")
    elif isinstance(errors, list):
        for nested in errors:
            yield from _error_lines(nested, prefix)
    else:
        yield f"{prefix}{errors}"


def _plan_stage(job: Job, after_stage: str | None) -> list[int]:
    """Create the next stage's units (idempotently); finish the job when there is none, or when every unit of
    the stage that ended failed (what it was to make is missing, so the next stage could only fail too)."""
    ended = job.units.filter(stage=after_stage).values_list("status", flat=True).order_by().distinct()
    if after_stage is not None and set(ended) == {UnitStatus.FAILED}:
        _job_finish(job)
        return []
    planned = pipeline_for(job.kind).plan(job, after_stage)
    if planned is None:
        _job_finish(job)
        return []
    stage, plans = planned
    # ignore_conflicts: units planned by an earlier, interrupted run of this step are kept as they are.
    JobUnit.objects.bulk_create(
        [JobUnit(job=job, key=plan.key, stage=plan.stage, params=plan.params) for plan in plans],
        ignore_conflicts=True,
        batch_size=500,
    )
    job.stage = stage
    job.save(update_fields=["stage"])
    pending = list(job.units.filter(stage=stage, status=UnitStatus.PENDING).values_list("id", flat=True))
    if not pending and not plans:
        return _plan_stage(job, stage)  # an empty stage: move straight on
    return pending


def _job_finish(job: Job) -> None:
    """End the job with the outcome of its work (see job_outcome), its error naming the root cause."""
    from .selectors import job_outcome, job_summary

    job.status, error = job_outcome(job)
    job.error = job.error or error
    job.finished_at = timezone.now()
    job.summary = job_summary(job)
    job.save(update_fields=["status", "error", "finished_at", "summary"])
    failed_units = job.summary["units"].get(UnitStatus.FAILED, 0)
    audit_record(actor=None, action=f"job.{job.status}", target=job, data={"failed_units": failed_units})


def job_start(*, job_id: int) -> None:
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status != JobStatus.QUEUED:
            return
        job.status = JobStatus.RUNNING
        job.started_at = timezone.now()
        job.save(update_fields=["status", "started_at"])
        try:
            unit_ids = _plan_stage(job, None)
        except Exception as exc:  # a planning bug or bad parameters must end the job, not hang it
            logger.exception("job %s: planning failed", job_id)
            job.status, job.error, job.finished_at = JobStatus.FAILED, f"planning failed: {exc}", timezone.now()
            job.save(update_fields=["status", "error", "finished_at"])
            return
        transaction.on_commit(lambda: _enqueue_units(unit_ids, whole_stage=True))


def unit_execute(*, unit_id: int, last_of_stage: bool = False) -> None:
    """Run one unit. Safe to call any number of times: only the first finished run writes."""
    unit = unit_rows.unit_for_run(unit_id)
    if unit is None or unit.status != UnitStatus.PENDING or unit.job.status != JobStatus.RUNNING:
        return
    unit_rows.unit_mark_started(unit_id)
    if last_of_stage:
        llm_job_finishing(unit.job_id)
    pipeline = pipeline_for(unit.job.kind)
    writer = None
    error = ""
    with llm_calls_held(job_id=unit.job_id) as calls:
        try:
            writer = pipeline.run(unit.job, unit)
        except Exception as exc:
            logger.exception("unit %s failed", unit_id)
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
    # Every call is recorded, whatever became of the unit; the writer may refer to the calls' rows.
    try:
        llm_calls_write(calls)
    except Exception as exc:  # without their rows the writer cannot cite the calls: fail the unit, do not strand it
        logger.exception("unit %s: recording its LLM calls failed", unit_id)
        _writer_discard(writer)
        writer, error = None, error or f"recording the LLM calls failed: {type(exc).__name__}: {exc}"
    try:
        _unit_finish(unit_id, writer, error)
    except Exception as exc:  # the writer failed and its transaction was rolled back: record the failure alone
        logger.exception("unit %s: writing the result failed", unit_id)
        _writer_discard(writer)
        _unit_finish(unit_id, None, f"{type(exc).__name__}: {exc}")
    # Checked after the commit (inside it, two last units could each see the other pending). Only a stage's
    # last unit needs the job lock, and job_advance checks again under it.
    if not unit_rows.stage_has_pending_units(unit.job_id, unit.stage):
        job_advance(job_id=unit.job_id, stage=unit.stage)


@transaction.atomic
def _unit_finish(unit_id: int, writer, error: str) -> None:
    if unit_rows.unit_status_locked(unit_id) != UnitStatus.PENDING:
        _writer_discard(writer)  # another delivery finished it, or the job was cancelled
        return
    result = (writer() or {}) if writer is not None and not error else {}
    unit_rows.unit_mark_finished(unit_id, error=error, result=result)


def _writer_discard(writer) -> None:
    """Let a writer that will not run release what it holds (a pipeline's optional `discard`)."""
    discard = getattr(writer, "discard", None)
    if discard is not None:
        discard()


def job_advance(*, job_id: int, stage: str) -> None:
    """When the last unit of `stage` ends, plan the next stage or finish the job."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status != JobStatus.RUNNING or job.stage != stage:
            return
        if job.units.filter(stage=stage, status=UnitStatus.PENDING).exists():
            return
        try:
            unit_ids = _plan_stage(job, stage)
        except Exception as exc:
            logger.exception("job %s: planning after %s failed", job_id, stage)
            job.status, job.error, job.finished_at = JobStatus.FAILED, f"planning failed: {exc}", timezone.now()
            job.save(update_fields=["status", "error", "finished_at"])
            return
        transaction.on_commit(lambda: _enqueue_units(unit_ids, whole_stage=True))


def job_cancel(*, job: Job, actor=None) -> Job:
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if not job.is_active:
            raise JobError(f"Job {job.pk} is {job.status}; only queued or running jobs can be cancelled.")
        cancelled = job.units.filter(status=UnitStatus.PENDING).update(
            status=UnitStatus.CANCELLED, finished_at=timezone.now()
        )
        job.status = JobStatus.CANCELLED
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "finished_at"])
        audit_record(actor=actor, action="job.cancel", target=job, data={"cancelled_units": cancelled})
    return job


def job_retry(*, job: Job, actor=None) -> Job:
    """Queue a new job with the same parameters (the old one is kept as it was)."""
    if job.is_active:
        raise JobError(f"Job {job.pk} is still {job.status}; cancel it first.")
    return job_create(kind=job.kind, params=job.params, actor=actor)


def jobs_recover() -> int:
    """Re-queue the work of unfinished jobs, e.g. after a worker was killed. Returns messages sent.

    Every pending unit of a running job's current stage is sent again: the broker cannot be asked
    which messages it still holds without reading its internals, and a unit delivered twice is
    still written once (the second delivery finds it finished, or loses the compare-and-set in
    _unit_finish). A unit running on another live worker at that moment may run twice.
    """
    from .tasks import job_start

    sent = 0
    for job in Job.objects.filter(status=JobStatus.QUEUED):
        job_start.delay(job.pk)
        sent += 1
    for job in Job.objects.filter(status=JobStatus.RUNNING):
        pending = list(job.units.filter(stage=job.stage, status=UnitStatus.PENDING).values_list("id", flat=True))
        if not pending:
            job_advance(job_id=job.pk, stage=job.stage)
            continue
        _enqueue_units(pending)
        sent += len(pending)
    return sent
