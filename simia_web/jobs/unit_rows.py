"""The statements the job runner makes on a unit's row around every run, and on the rows of many units
for the leases that say which worker holds them (see jobs.leases).

Each unit runs five of them (read, claim, lock, mark finished, "is the stage still open?"), each a
single-row query on an indexed column; the LLM calls between them take seconds. A worker's leases are
renewed in one statement per heartbeat for all the units it holds, never one per unit or per call.
"""

from datetime import timedelta

from django.db.models import F, Q
from django.utils import timezone

from .models import JobUnit, UnitStatus, WatchdogTurn

# The fields a run reads (others stay deferred).
_RUN_FIELDS = ("id", "job_id", "stage", "key", "params", "status", "job__id", "job__kind", "job__params", "job__status")


def unit_for_run(unit_id: int) -> JobUnit | None:
    """The unit with its job (only the fields a run reads), or None when there is no such unit."""
    return JobUnit.objects.select_related("job").only(*_RUN_FIELDS).filter(pk=unit_id).first()


def _free_for(holder: str, now):
    """Units no other worker holds: no lease (no holder), a lease of `holder`'s own, or a lease run out."""
    return Q(lease_holder__in=("", holder)) | Q(lease_until__lt=now)


def unit_claim(unit_id: int, *, holder: str, lease_seconds: float, new_attempt: bool = True) -> bool:
    """Mark a pending unit started by `holder`, unless another worker holds it; True when claimed.

    A run interrupted by an outage and started again claims without counting an attempt: the attempt
    was the outage's, not the unit's.
    """
    now = timezone.now()
    changes = {"started_at": now, "lease_holder": holder, "lease_until": now + timedelta(seconds=lease_seconds)}
    if new_attempt:
        changes["attempts"] = F("attempts") + 1
    claimed = JobUnit.objects.filter(_free_for(holder, now), pk=unit_id, status=UnitStatus.PENDING)
    return claimed.update(**changes) == 1


def unit_status_locked(unit_id: int) -> str:
    """The unit's status, its row locked until the transaction ends (where the database has row locks)."""
    status = JobUnit.objects.select_for_update().filter(pk=unit_id).values_list("status", flat=True).first()
    if status is None:  # its job was deleted while it ran
        raise JobUnit.DoesNotExist(f"no job unit {unit_id}")
    return status


def unit_mark_finished(unit_id: int, *, error: str, result: dict) -> None:
    JobUnit.objects.filter(pk=unit_id).update(
        status=UnitStatus.FAILED if error else UnitStatus.DONE,
        error=error[:8000],
        result=result,
        finished_at=timezone.now(),
        lease_holder="",
        lease_until=None,
    )


def stage_has_pending_units(job_id: int, stage: str) -> bool:
    return JobUnit.objects.filter(job_id=job_id, stage=stage, status=UnitStatus.PENDING).exists()


def units_lease_renew(unit_ids: list[int], *, holder: str, lease_seconds: float) -> int:
    """Extend (or take) the leases of pending units `holder` holds, where no other worker holds them."""
    now = timezone.now()
    held = JobUnit.objects.filter(_free_for(holder, now), pk__in=unit_ids, status=UnitStatus.PENDING)
    return held.update(lease_holder=holder, lease_until=now + timedelta(seconds=lease_seconds))


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
