"""The statements the job runner makes on a unit's row around every run, and on the rows of many units
for the leases that say which worker holds them and the progress long units report (see jobs.leases).

Each unit runs four of them (claim and read, lock, mark finished, "is the stage still open?"), each a
single-row statement on an indexed column. They are fixed SQL, written once from the models' table and
column names: built through the ORM, each cost about ten times as much CPU as the SQL itself, most of it
building and compiling the query on the thread every other unit of the worker waits on for the GIL
(docs/performance.md). The SQL is plain enough for PostgreSQL and SQLite (3.35 and later: UPDATE ... FROM ...
RETURNING); values go through the fields' own adapters, and rows come back as model instances. A
worker's leases are renewed in one statement per heartbeat for all the units it holds, never one per
unit or per call, and their progress in one more when some of it changed (those two, once a beat, are
built through the ORM).
"""

import functools
import operator
from datetime import timedelta
from typing import Any, cast

from django.db import connection
from django.db.models import Case, F, Field, JSONField, Model, Q, Value, When
from django.utils import timezone

from .models import Job, JobStatus, JobUnit, UnitStatus, WatchdogTurn

# The fields a run reads (others stay deferred, as with .only()); the job's id is the unit's job_id.
_UNIT_FIELDS = ("id", "job_id", "stage", "key", "params", "status")
_JOB_FIELDS = ("kind", "params", "status")


def _field(model: type[Model], name: str) -> Field:
    return cast(Field, model._meta.get_field(name))  # a column of the model's own, never a reverse relation


class _Statements:
    """The runner's statements in the current database's dialect, with the fields that adapt their values."""

    def __init__(self):
        def column(field: Field) -> str:
            return connection.ops.quote_name(cast(str, field.column))

        unit, job = JobUnit._meta, Job._meta
        self.unit_fields = {name: _field(JobUnit, name.removesuffix("_id")) for name in _UNIT_FIELDS}
        self.job_fields = {name: _field(Job, name) for name in _JOB_FIELDS}
        u = {name: column(field) for name, field in self.unit_fields.items()}
        others: tuple[str, ...] = ("attempts", "started_at", "finished_at", "lease_holder", "lease_until")
        others += ("lease_taken_from", "error", "result")
        u |= {name: column(_field(JobUnit, name)) for name in others}
        j = {name: column(field) for name, field in self.job_fields.items()} | {"id": column(_field(Job, "id"))}
        quote = connection.ops.quote_name
        unit_table, job_table = quote(unit.db_table), quote(job.db_table)
        job_of_unit = f"FROM {job_table} WHERE {j['id']} = {unit_table}.{u['job_id']}"
        # The job's columns by subqueries: SQLite's RETURNING names only the updated table's.
        returned = [f"{unit_table}.{u[name]}" for name in _UNIT_FIELDS]
        returned += [f"(SELECT {j[name]} {job_of_unit})" for name in _JOB_FIELDS]
        # Pending, its job running, and no other worker holding it: no holder, this one, the pool's parent process
        # that took its message for it, or a lease run out.
        self.claim = (
            f"UPDATE {unit_table} SET {u['attempts']} = {u['attempts']} + %s, {u['started_at']} = %s, "
            f"{u['lease_holder']} = %s, {u['lease_until']} = %s, {u['lease_taken_from']} = '' "
            f"WHERE {u['id']} = %s AND {u['status']} = %s "
            f"AND ({u['lease_holder']} IN ('', %s, %s) OR {u['lease_until']} < %s) "
            f"AND EXISTS (SELECT 1 {job_of_unit} AND {j['status']} = %s) "
            f"RETURNING {', '.join(returned)}"
        )
        for_update = " FOR UPDATE" if connection.features.has_select_for_update else ""
        self.status = f"SELECT {u['status']} FROM {unit_table} WHERE {u['id']} = %s{for_update}"
        self.mark_finished = (
            f"UPDATE {unit_table} SET {u['status']} = %s, {u['error']} = %s, {u['result']} = %s, "
            f"{u['finished_at']} = %s, {u['lease_holder']} = '', {u['lease_until']} = NULL WHERE {u['id']} = %s"
        )
        self.stage_open = (
            f"SELECT 1 FROM {unit_table} WHERE {u['job_id']} = %s AND {u['stage']} = %s AND {u['status']} = %s LIMIT 1"
        )
        self.result_field = _field(JobUnit, "result")
        self.time_field = _field(JobUnit, "started_at")

    def instance[M: Model](self, model: type[M], fields: dict[str, Field], values: Any) -> M:
        """A model instance from a row, each value through its field's conversion (JSON text to objects)."""
        converted = []
        for field, value in zip(fields.values(), values, strict=True):
            from_db = getattr(field, "from_db_value", None)
            converted.append(from_db(value, None, connection) if from_db is not None else value)
        return model.from_db(connection.alias, list(fields), converted)

    def now(self):
        return self.time_field.get_db_prep_value(timezone.now(), connection)


@functools.cache
def _statements(vendor: str) -> _Statements:
    return _Statements()


def _sql() -> _Statements:
    return _statements(connection.vendor)


def unit_claim_for_run(
    unit_id: int, *, holder: str, lease_seconds: float, new_attempt: bool = True, parent: str = ""
) -> JobUnit | None:
    """Mark a pending unit of a running job started by `holder`, unless another worker holds it, and return it
    with its job (only the fields a run reads); None when it is not to be run here (gone, ended, or held).
    A lease of `parent` (the pool's parent process, which took the unit's message) passes to `holder`.

    A run interrupted by an outage and started again claims without counting an attempt: the attempt
    was the outage's, not the unit's.
    """
    sql = _sql()
    now = timezone.now()
    lease_until = sql.time_field.get_db_prep_value(now + timedelta(seconds=lease_seconds), connection)
    now = sql.time_field.get_db_prep_value(now, connection)
    params = [int(new_attempt), now, holder, lease_until, unit_id, UnitStatus.PENDING.value, holder, parent or holder]
    params.append(now)
    params.append(JobStatus.RUNNING.value)
    with connection.cursor() as cursor:
        cursor.execute(sql.claim, params)
        row = cursor.fetchone()
    if row is None:
        return None
    unit_values, job_values = row[: len(_UNIT_FIELDS)], row[len(_UNIT_FIELDS) :]
    unit = sql.instance(JobUnit, sql.unit_fields, unit_values)
    job_fields = {"id": _field(Job, "id")} | sql.job_fields
    unit.job = sql.instance(Job, job_fields, (unit.job_id, *job_values))
    return unit


def unit_status_locked(unit_id: int) -> str:
    """The unit's status, its row locked until the transaction ends (where the database has row locks)."""
    with connection.cursor() as cursor:
        cursor.execute(_sql().status, [unit_id])
        row = cursor.fetchone()
    if row is None:  # its job was deleted while it ran
        raise JobUnit.DoesNotExist(f"no job unit {unit_id}")
    return row[0]


def unit_mark_finished(unit_id: int, *, error: str, result: dict) -> None:
    sql = _sql()
    status = UnitStatus.FAILED if error else UnitStatus.DONE
    result_value = sql.result_field.get_db_prep_save(result, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql.mark_finished, [status.value, error[:8000], result_value, sql.now(), unit_id])


def stage_has_pending_units(job_id: int, stage: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_sql().stage_open, [job_id, stage, UnitStatus.PENDING.value])
        return cursor.fetchone() is not None


def _free_for(holder: str, now):
    """Units no other worker holds: no lease (no holder), a lease of `holder`'s own, or a lease run out."""
    return Q(lease_holder__in=("", holder)) | Q(lease_until__lt=now)


def units_lease_renew(unit_ids: list[int], *, holder: str, lease_seconds: float) -> int:
    """Extend (or take) the leases of pending units `holder` holds, where no other worker holds them and the
    watchdog did not take the lease back from `holder` (see units_lease_take_back)."""
    now = timezone.now()
    held = JobUnit.objects.filter(_free_for(holder, now), pk__in=unit_ids, status=UnitStatus.PENDING)
    held = held.exclude(lease_taken_from=holder)
    return held.update(lease_holder=holder, lease_until=now + timedelta(seconds=lease_seconds))


def units_gone_elsewhere(unit_ids: list[int], *, holder: str) -> list[int]:
    """Of the units `holder` took messages for, those it need hold no longer: ended, or run by another process
    under a live lease (a pool's child, to which the parent's lease passed when it claimed the unit)."""
    now = timezone.now()
    units = JobUnit.objects.filter(pk__in=unit_ids)
    elsewhere = Q(lease_until__gte=now) & ~Q(lease_holder__in=("", holder))
    return list(units.filter(~Q(status=UnitStatus.PENDING) | elsewhere).values_list("id", flat=True))


def units_lease_stalled(job_id: int, stage: str, now, *, stall_seconds: float) -> list[tuple[int, str]]:
    """The stage's pending units under a live lease that nobody has started since their message was last sent,
    `stall_seconds` ago or more: (id, holder). A holder alive enough to renew but unable to start them (a wedged
    process, a pool whose processes never take them) would otherwise keep them forever."""
    pending = JobUnit.objects.filter(job_id=job_id, stage=stage, status=UnitStatus.PENDING, lease_until__gte=now)
    unstarted = Q(started_at__isnull=True) | Q(started_at__lt=F("dispatched_at"))
    sent_before = now - timedelta(seconds=stall_seconds)
    stalled = pending.exclude(lease_holder="").filter(unstarted, dispatched_at__lt=sent_before)
    return list(stalled.values_list("id", "lease_holder"))


def units_lease_take_back(stalled: list[tuple[int, str]]) -> int:
    """Clear the leases of stalled units, each where its holder still holds it, noting whom it was taken from."""
    if not stalled:
        return 0
    still_held = functools.reduce(operator.or_, (Q(pk=unit_id, lease_holder=holder) for unit_id, holder in stalled))
    held = JobUnit.objects.filter(still_held, status=UnitStatus.PENDING)
    # Both SETs read the row as it was (SQL's UPDATE semantics, PostgreSQL's and SQLite's alike).
    return held.update(lease_taken_from=F("lease_holder"), lease_holder="", lease_until=None)


def units_progress_write(progress: dict[int, dict], *, holder: str) -> int:
    """Write each unit's progress ({"done", ...} by unit id) where `holder` holds the unit, still pending, and its
    progress moves forward: a progress written is never lowered, nor written on a unit another worker runs. (A unit
    run again, after an outage or by another worker, shows the furthest a run of it got until the new run passes it.)
    """
    forward = (
        Q(pk=unit_id) & (~Q(progress__has_key="done") | Q(progress__done__lt=value["done"]))
        for unit_id, value in progress.items()
    )
    by_unit = [When(pk=unit_id, then=Value(value, output_field=JSONField())) for unit_id, value in progress.items()]
    moving_on = functools.reduce(operator.or_, forward)
    held = JobUnit.objects.filter(moving_on, status=UnitStatus.PENDING, lease_holder=holder)
    return held.update(progress=Case(*by_unit, default=F("progress")))


def units_mark_dispatched(unit_ids: list[int]) -> None:
    """Note that the units' messages were sent now; a lease that ran out (its worker gone) is cleared."""
    now = timezone.now()
    unheld = JobUnit.objects.filter(Q(lease_holder="") | Q(lease_until__lt=now), pk__in=unit_ids)
    unheld.update(dispatched_at=now, lease_holder="", lease_until=None)


def units_lease_lapsed(job_id: int, stage: str, now) -> list[int]:
    """The stage's pending units whose worker took them from the queue and stopped renewing their lease."""
    pending = JobUnit.objects.filter(job_id=job_id, stage=stage, status=UnitStatus.PENDING)
    return list(pending.exclude(lease_holder="").filter(lease_until__lt=now).values_list("id", flat=True))


def units_never_held(job_id: int, stage: str):
    """The stage's pending units no worker has taken since their message was sent: queued, or lost."""
    return JobUnit.objects.filter(job_id=job_id, stage=stage, status=UnitStatus.PENDING, lease_holder="")


WATCHDOG = "jobs"


def watchdog_turn_take(*, holder: str, period: float) -> WatchdogTurn | None:
    """The watchdog's row when `holder` looks for lost work now (no other worker looked within `period`)."""
    now = timezone.now()
    turn = WatchdogTurn.objects.filter(name=WATCHDOG, looked_at__lt=now - timedelta(seconds=period))
    if turn.update(looked_at=now, looked_by=holder):
        return WatchdogTurn.objects.get(name=WATCHDOG)
    row, created = WatchdogTurn.objects.get_or_create(name=WATCHDOG, defaults={"looked_at": now, "looked_by": holder})
    return row if created else None
