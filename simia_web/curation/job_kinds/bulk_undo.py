"""The "bulk-undo" job kind: take back a bulk decision of more items than a request undoes (BULK_UNDO_MAX), such as
one a bulk-decision job made.

Its units are ranges of the decision's items, about IDS_PER_UNIT each, read once when it is planned, that any worker
takes; each undoes its range as the undo of a small bulk decision does (items changed since, or held by someone else
right now, are left and counted), in its writer, in the transaction that marks it done: a unit redelivered or run
twice at once undoes its items once. Who may undo the decision was checked when the job was queued
(curation.services.reviews_bulk_undo_queue).
"""

from uuid import UUID

from simia_web.accounts.models import User
from simia_web.curation.models import Review
from simia_web.curation.services import BULK_UNDO_JOB_KIND, reviews_bulk_undo_range
from simia_web.jobs.kinds import JobKind, id_range_units, job_kind_register
from simia_web.jobs.selectors import units_results_summed

from .bulk_decision import IDS_READ

UNDO = "undo"
IDS_PER_UNIT = 5_000  # items per unit: as a bulk decision's, a short transaction of writes
COUNTS = ("undone", "moved_on", "held")


@job_kind_register
class BulkUndoKind(JobKind):
    kind = BULK_UNDO_JOB_KIND
    label = "Bulk decision undone"
    stages = (UNDO,)
    parameters = None  # queued from a bulk decision's Undo (curation.services.reviews_bulk_undo_queue)

    def plan(self, job, stage):
        if stage is not None:
            return None
        items = Review.objects.filter(batch=UUID(job.params["batch"])).order_by("trajectory_id")
        ids = items.values_list("trajectory_id", flat=True).iterator(chunk_size=IDS_READ)
        return (UNDO, units) if (units := id_range_units(UNDO, ids, IDS_PER_UNIT)) else None

    def run(self, job, unit):
        def write():
            outcome = reviews_bulk_undo_range(
                batch=UUID(job.params["batch"]),
                actor=User.objects.get(pk=job.params["actor"]),
                low=unit.params["from"],
                high=unit.params["to"],
            )
            return {name: getattr(outcome, name) for name in COUNTS}

        return write

    def summary(self, job):
        return units_results_summed(job, COUNTS)
