"""Job lifecycle: create, plan stages, execute units exactly once, advance, cancel, recover, heal.

Outages of the database, Redis or the broker are never a unit's or a job's failure: work waits them
out and starts again (core.outages), and messages lost with a broker are sent again by the watchdog.
"""

import logging
import traceback
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from simia_web.core.db import db_connection_check
from simia_web.core.dispatch import task_producer, task_send
from simia_web.core.errors import Conflict, ValidationFailed
from simia_web.core.outages import OutagePauses, is_outage, through_outages
from simia_web.core.services import audit_record
from simia_web.llm.services import llm_calls_held, llm_calls_write, llm_job_finishing

from . import leases, unit_rows
from .kinds import job_kind_for, job_kinds_queueable
from .models import Job, JobStatus, JobUnit, UnitStatus, WatchdogTurn
from .signals import job_ended, unit_leases_taken_back, watchdog_looked

logger = logging.getLogger(__name__)


class JobError(Conflict):
    """The job is not in a state that allows the action (cancel an ended job, retry a running one): a 409."""


# Messages sent to Redis per round trip. Building one costs CPU and holds the GIL: in one batch of a whole
# stage, the worker that plans it could not take the stage's first messages, nor start their units, until the
# last was built. Between batches the sending thread waits on Redis and the worker's other threads run
# (docs/performance.md has the figures).
PUBLISH_BATCH = 32
# The tasks (jobs.tasks) this module queues, by name: that module imports this one.
JOB_START = "simia_web.jobs.tasks.job_start"
UNIT_EXECUTE = "simia_web.jobs.tasks.unit_execute"
QUEUE_PROBE = "simia_web.jobs.tasks.queue_probe"
# The watchdog's probes (see jobs_heal): how many that came back it keeps, and how many beats after its
# return a probe is trusted (a worker leases what it takes from the queue within a beat).
_PROBES_KEPT = 8
_PROBE_TRUSTED_AFTER = 1.5


def _enqueue_units(unit_ids: list[int], *, whole_stage: bool = False) -> None:
    """Send one message per unit, PUBLISH_BATCH to a Redis round trip, then note when they were sent.

    When the ids are a whole stage, the last message says so: the worker that starts it knows that the
    stage has no unit left to start (see llm_job_finishing). The time is noted once all are sent (one
    UPDATE): a probe the watchdog sent meanwhile is ahead of some of them in the queue (see jobs_heal).
    A send the broker cut short leaves the old time, and the watchdog sends the units again.
    """
    last = unit_ids[-1] if whole_stage and unit_ids else None
    with task_producer() as producer, producer.batch(max_size=PUBLISH_BATCH):
        for position, unit_id in enumerate(unit_ids):
            kwargs = {"last_of_stage": True} if unit_id == last else {}
            # The first message declares the queue on this connection; Celery would check that again for
            # each of the others (a copy of the queue entity each, a quarter of a message's CPU).
            declare: list | None = None if position == 0 else []
            # `declare` is a kombu publish option that Celery passes on; the stubs list only Celery's own.
            task_send(UNIT_EXECUTE, (unit_id,), kwargs, producer=producer, declare=declare)
    unit_rows.units_mark_dispatched(unit_ids)


def job_create(*, kind: str, params: dict, actor=None, workspace_id: int | None = None) -> Job:
    """Write a job whose parameters its kind has checked (see job_queue) and start it after the commit. It works in
    the workspace `workspace_id` (the `default` one when None): what it reads and what it makes are that
    workspace's."""
    job_kind_for(kind)  # unknown kinds fail here, before anything is written
    owner = {} if workspace_id is None else {"workspace_id": workspace_id}
    with transaction.atomic():
        job = Job.objects.create(
            kind=kind, params=params, created_by=actor if getattr(actor, "pk", None) else None, **owner
        )
        audit_record(actor=actor, action="job.create", target=job, data={"kind": kind, "params": params})
        # With the broker away the job is queued all the same: the watchdog sends its start message later.
        transaction.on_commit(lambda: task_send(JOB_START, (job.pk,)), robust=True)
    return job


def job_queue(*, kind: object, params: dict, actor=None, workspace=None) -> Job:
    """Queue a job of a registered kind in `workspace` (the `default` one when None), the one way the commands, the
    queue pages and the API do it.

    The kind's parameters serializer checks the ranges and caps (and names only the workspace's domains: it has
    the workspace in its context) and its save() queues the job, so a refused job writes nothing. Raises
    ValidationFailed with the refusals per parameter.
    """
    job_kind = job_kinds_queueable().get(kind) if isinstance(kind, str) else None
    if job_kind is None:
        raise ValidationFailed(f"choose one of {', '.join(sorted(job_kinds_queueable()))}", field="kind")
    parameters = job_kind.parameters_serializer()(data=params, context={"workspace": workspace})
    if not parameters.is_valid():
        raise ValidationFailed.of({name: list(_error_lines(errors)) for name, errors in parameters.errors.items()})
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
    planned = job_kind_for(job.kind).plan(job, after_stage)
    if planned is None:
        _job_finish(job)
        return []
    stage, plans = planned
    # ignore_conflicts: units planned by an earlier, interrupted run of this step are kept as they are.
    now = timezone.now()
    JobUnit.objects.bulk_create(
        [JobUnit(job=job, key=plan.key, stage=plan.stage, params=plan.params, dispatched_at=now) for plan in plans],
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
    job_ended.send(sender=Job, job=job)


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
            if is_outage(exc):
                raise  # rolled back: the job is still queued and starts once the server is back
            logger.exception("job %s: planning failed", job_id)
            job.status, job.error, job.finished_at = JobStatus.FAILED, f"planning failed: {exc}", timezone.now()
            job.save(update_fields=["status", "error", "finished_at"])
            job_ended.send(sender=Job, job=job)
            return
        transaction.on_commit(lambda: _enqueue_units(unit_ids, whole_stage=True), robust=True)


def unit_execute(*, unit_id: int, last_of_stage: bool = False) -> None:
    """Run one unit. Safe to call any number of times: only the first finished run writes.

    A run that meets an outage waits it out and starts again, without counting an attempt: the unit
    never fails for it. Its LLM calls so far are recorded all the same.
    """
    with leases.unit_running(unit_id) as first_here:
        if not first_here:
            return  # a second message for a unit another thread of this worker runs
        run = _UnitRun(unit_id, last_of_stage)
        pauses = OutagePauses(f"unit {unit_id}")
        while True:
            try:
                return run.once()
            except Exception as exc:
                if not is_outage(exc):
                    raise
                pauses.pause(exc)


class _UnitRun:
    def __init__(self, unit_id: int, last_of_stage: bool):
        self.unit_id = unit_id
        self.last_of_stage = last_of_stage
        self.claimed = False  # by an earlier try of this run, which an outage interrupted

    def once(self) -> None:
        unit_id = self.unit_id
        db_connection_check()  # the thread may have been idle through a database restart
        holder, lease = leases.lease_holder(), leases.lease_seconds()
        unit = unit_rows.unit_claim_for_run(
            unit_id, holder=holder, lease_seconds=lease, new_attempt=not self.claimed, parent=leases.parent_holder()
        )
        if unit is None:
            return  # gone, ended, its job no longer running, or another worker holds it: running it, or about to
        self.claimed = True
        if self.last_of_stage:
            llm_job_finishing(unit.job_id)
        job_kind = job_kind_for(unit.job.kind)
        writer, error, outage = None, "", None
        with llm_calls_held(job_id=unit.job_id) as calls:
            try:
                writer = job_kind.run(unit.job, unit)
            except Exception as exc:
                if is_outage(exc):
                    outage = exc
                else:
                    logger.exception("unit %s failed", unit_id)
                    error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        # Every call is recorded, whatever became of the unit; the writer may refer to the calls' rows.
        try:
            through_outages(lambda: llm_calls_write(calls), what=f"unit {unit_id}'s LLM calls")
        except Exception as exc:  # without their rows the writer cannot cite the calls: fail the unit, do not strand it
            logger.exception("unit %s: recording its LLM calls failed", unit_id)
            _writer_discard(writer)
            writer, error = None, error or f"recording the LLM calls failed: {type(exc).__name__}: {exc}"
        if outage is not None:
            raise outage
        try:
            _unit_finish(unit_id, writer, error)
        except Exception as exc:  # the writer failed and its transaction was rolled back
            _writer_discard(writer)
            if is_outage(exc):
                raise  # nothing was written: the unit runs again once the database is back
            logger.exception("unit %s: writing the result failed", unit_id)
            _unit_finish(unit_id, None, f"{type(exc).__name__}: {exc}")
        # The unit is written: what is left must not run it again.
        through_outages(lambda: _stage_maybe_ended(unit), what=f"the stage after unit {unit_id}")


def _stage_maybe_ended(unit: JobUnit) -> None:
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
    """Let a writer that will not run release what it holds (a kind's optional `discard`)."""
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
            if is_outage(exc):
                raise  # rolled back: the stage is planned once the server is back
            logger.exception("job %s: planning after %s failed", job_id, stage)
            job.status, job.error, job.finished_at = JobStatus.FAILED, f"planning failed: {exc}", timezone.now()
            job.save(update_fields=["status", "error", "finished_at"])
            job_ended.send(sender=Job, job=job)
            return
        # With the broker away, the units are planned all the same: the watchdog sends them later.
        transaction.on_commit(lambda: _enqueue_units(unit_ids, whole_stage=True), robust=True)


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
        job_ended.send(sender=Job, job=job)
    return job


def job_retry(*, job: Job, actor=None) -> Job:
    """Queue a new job with the same parameters (the old one is kept as it was)."""
    if job.is_active:
        raise JobError(f"Job {job.pk} is still {job.status}; cancel it first.")
    return job_create(kind=job.kind, params=job.params, actor=actor, workspace_id=job.workspace_id)


def jobs_recover() -> int:
    """Re-queue all the work of unfinished jobs, at once (`manage.py resume_jobs`). Returns messages sent.

    Every pending unit of a running job's current stage is sent again, lost or not: a unit delivered
    twice is still written once (the second delivery finds it finished, or held by the worker running
    it, or loses the compare-and-set in _unit_finish). The watchdog (jobs_heal) does the same on its
    own, for the units it can tell are lost.
    """
    sent = 0
    for job in Job.objects.filter(status=JobStatus.QUEUED):
        task_send(JOB_START, (job.pk,))
        sent += 1
    for job in Job.objects.filter(status=JobStatus.RUNNING):
        pending = list(job.units.filter(stage=job.stage, status=UnitStatus.PENDING).values_list("id", flat=True))
        if not pending:
            job_advance(job_id=job.pk, stage=job.stage)
            continue
        _enqueue_units(pending)
        sent += len(pending)
    return sent


def jobs_heal() -> int:
    """Send again the messages the broker lost; the watchdog's look, one worker's a beat. Returns messages sent.

    A pending unit of a running job's current stage is in the broker, held by a worker (which renews
    its lease, see jobs.leases), or lost. Three rules tell which, without reading the broker's queue:

    - a unit whose lease ran out was taken from the queue by a worker that is gone (killed, its machine
      lost): its message is lost with it;
    - a unit never held, whose message was sent before a probe that has come back through the queue, is
      lost too: the queue hands out messages in order, so every message ahead of the probe had been
      taken, and a worker that takes one leases its unit within a beat (the probe's return is trusted
      a beat and a half after it; were a lease later still, the second message would find the unit
      held, or be the one that runs it). A unit queued behind thousands of others is behind every probe
      that came back, and is left where it is;
    - a unit leased but not started for SIMIA_UNIT_STALL_SECONDS since it was sent is stuck with a process that
      renews leases but runs nothing (wedged): its lease is taken back, its holder renews it no more, and it is sent
      again for any worker, that one included, to run.

    Each look sends a probe when some unit is unheld (one message a beat for the cluster). A queued job
    whose start message was lost is started by the second rule; a running job whose stage has no pending
    unit left (its last unit's worker died before it could plan the next) is moved on.
    """
    period = settings.SIMIA_UNIT_HEARTBEAT_SECONDS
    # Somewhat under a beat, so that a worker beating every beat takes every turn it finds free.
    turn = unit_rows.watchdog_turn_take(holder=leases.lease_holder(), period=0.8 * period)
    if turn is None:
        return 0
    now = timezone.now()
    passed = _probe_passed(turn.probes, trusted_before=now - timedelta(seconds=_PROBE_TRUSTED_AFTER * period))
    lost, unheld = [], False
    for job in Job.objects.filter(status=JobStatus.RUNNING).only("id", "kind", "stage"):
        lost += unit_rows.units_lease_lapsed(job.pk, job.stage, now)
        lost += _stalled_leases_take_back(job, now)
        never_held = unit_rows.units_never_held(job.pk, job.stage)
        if passed is not None:
            sent_before_it = never_held.filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=passed))
            lost += sent_before_it.values_list("id", flat=True)
        if never_held.exists():
            unheld = True
        elif not unit_rows.stage_has_pending_units(job.pk, job.stage):
            job_advance(job_id=job.pk, stage=job.stage)
    queued = Job.objects.filter(status=JobStatus.QUEUED)
    unstarted = list(queued.filter(created_at__lt=passed).values_list("id", flat=True)) if passed else []
    if unheld or queued.exists():
        task_send(QUEUE_PROBE, (now.timestamp(),))
    if lost:
        _enqueue_units(lost)
    for job_id in unstarted:
        task_send(JOB_START, (job_id,))
    if lost or unstarted:
        logger.warning("watchdog: sent again %d units and %d job starts, lost", len(lost), len(unstarted))
    watchdog_looked.send(sender=Job, now=now)
    return len(lost) + len(unstarted)


def _stalled_leases_take_back(job: Job, now) -> list[int]:
    """Take back the leases of the job's units held unstarted too long (see jobs_heal); their ids, to send again."""
    stalled = unit_rows.units_lease_stalled(job.pk, job.stage, now, stall_seconds=settings.SIMIA_UNIT_STALL_SECONDS)
    if not stalled or not unit_rows.units_lease_take_back(stalled):
        return []
    for unit_id, holder in stalled:
        logger.warning(
            "watchdog: unit %s of job %s was leased by %s for over %.0f s without starting; taken back and sent again",
            unit_id,
            job.pk,
            holder,
            settings.SIMIA_UNIT_STALL_SECONDS,
        )
    unit_leases_taken_back.send(sender=Job, job=job, units=[unit_id for unit_id, _ in stalled])
    return [unit_id for unit_id, _ in stalled]


def _probe_passed(probes: list, *, trusted_before):
    """When the latest probe was sent that came back through the queue before `trusted_before`, or None."""
    cutoff = trusted_before.timestamp()
    sent = [sent_at for sent_at, seen_at in probes if seen_at <= cutoff]
    return datetime.fromtimestamp(max(sent), tz=UTC) if sent else None


def queue_probe_seen(*, sent_at: float) -> None:
    """A probe the watchdog sent at `sent_at` came out of the queue now; the latest few are kept."""
    with transaction.atomic():
        turn = WatchdogTurn.objects.select_for_update().filter(name=unit_rows.WATCHDOG).first()
        if turn is None:
            return
        turn.probes = [*turn.probes, [sent_at, timezone.now().timestamp()]][-_PROBES_KEPT:]
        turn.save(update_fields=["probes"])
