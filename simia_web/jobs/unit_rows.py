"""The statements the job runner makes on a unit's row around every run.

Each unit runs five of them (read, mark started, lock, mark finished, "is the stage still open?"),
each a single-row query on an indexed column; the LLM calls between them take seconds.
"""

from django.db.models import F
from django.utils import timezone

from .models import JobUnit, UnitStatus

# The fields a run reads (others stay deferred).
_RUN_FIELDS = ("id", "job_id", "stage", "key", "params", "status", "job__id", "job__kind", "job__params", "job__status")


def unit_for_run(unit_id: int) -> JobUnit | None:
    """The unit with its job (only the fields a run reads), or None when there is no such unit."""
    return JobUnit.objects.select_related("job").only(*_RUN_FIELDS).filter(pk=unit_id).first()


def unit_mark_started(unit_id: int) -> None:
    JobUnit.objects.filter(pk=unit_id).update(attempts=F("attempts") + 1, started_at=timezone.now())


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
    )


def stage_has_pending_units(job_id: int, stage: str) -> bool:
    return JobUnit.objects.filter(job_id=job_id, stage=stage, status=UnitStatus.PENDING).exists()
