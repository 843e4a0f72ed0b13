"""The "bulk-decision" job kind: accept or reject every item of a filtered queue, too many for one request.

The job keeps the queue page's filter (or names a selection another app registered, such as an audit's frozen
population: curation.services.bulk_selection_register), not a list of ids. Its units are ranges of ids of about
IDS_PER_UNIT items each, read once when it is planned, that any worker takes; each decides the items of its range
that match the filter when it runs, as reviews_bulk does (held items, items a person decided one by one and, when
accepting, empty ones are left and counted), under the job's one batch, which the Undo of the job's page takes back
whole (in a job of ranges, curation.job_kinds.bulk_undo). A unit decides in its writer, in the transaction that
marks it done: a unit redelivered or run twice at once decides its items once. Its progress is the units done. It
decides only items of its own workspace (the job's), whatever the filter or selection names.
"""

from collections.abc import Iterator
from types import SimpleNamespace
from uuid import UUID

from django.http import QueryDict

from simia_web.accounts.models import User
from simia_web.accounts.scoping import scoped
from simia_web.curation.selectors.queue import queue_filterset, queue_selection
from simia_web.curation.services import BULK_JOB_KIND, BULK_SELECTIONS, reviews_bulk
from simia_web.jobs.kinds import JobKind, id_range_units, job_kind_register
from simia_web.jobs.selectors import units_results_summed

DECIDE = "decide"
# Ids per unit: a unit's writes (its trajectories, reviews, changes and audit rows) stay a short transaction.
IDS_PER_UNIT = 5_000
IDS_READ = 20_000  # ids read at a time when the units are planned
COUNTS = ("changed", "held", "decided", "unreviewable")


def _selection(job):
    reviewer = User.objects.get(pk=job.params["reviewer"])
    filterset = queue_filterset(
        params=QueryDict(job.params["query"]),
        request=SimpleNamespace(user=reviewer),
        workspace_ids=[job.workspace_id],
    )
    return reviewer, queue_selection(filterset.qs)


def _ids(job) -> Iterator[int]:
    """The ids of the items the job decides as they stand now, in order: its queue filter's, in one read; or those of
    a selection another app registered, IDS_READ ids of its bounds at a time (it names its items by id)."""
    chosen = job.params.get("selection")
    if not chosen:
        yield from _selection(job)[1].order_by("pk").values_list("pk", flat=True).iterator(chunk_size=IDS_READ)
        return
    bounds = BULK_SELECTIONS[chosen["name"]].bounds(chosen)
    if bounds is not None:
        for low in range(bounds[0], bounds[1] + 1, IDS_READ):
            yield from _range(job, low, low + IDS_READ)[1].order_by("pk").values_list("pk", flat=True)


def _range(job, low: int, high: int):
    """(reviewer, the items of ids in [low, high))."""
    chosen = job.params.get("selection")
    if chosen:
        items = BULK_SELECTIONS[chosen["name"]].trajectories(chosen, low, high)
        return User.objects.get(pk=job.params["reviewer"]), scoped(items, [job.workspace_id])
    reviewer, selection = _selection(job)
    return reviewer, selection.filter(pk__gte=low, pk__lt=high)


@job_kind_register
class BulkDecisionKind(JobKind):
    kind = BULK_JOB_KIND
    label = "Bulk decision"
    stages = (DECIDE,)
    parameters = None  # queued from the review queue (curation.services.reviews_bulk_queue)
    result_template = "curation/_bulk_job_undo.html"

    def plan(self, job, stage):
        if stage is not None:
            return None
        # Ranges of IDS_PER_UNIT of the items that meet: an item that comes to match between two ids read is decided.
        return (DECIDE, units) if (units := id_range_units(DECIDE, _ids(job), IDS_PER_UNIT)) else None

    def run(self, job, unit):
        def write():
            reviewer, selection = _range(job, unit.params["from"], unit.params["to"])
            outcome = reviews_bulk(
                trajectories=selection,
                reviewer=reviewer,
                decision=job.params["decision"],
                reason=job.params["reason"],
                batch=UUID(job.params["batch"]),
                audit=job.params.get("audit"),
            )
            return {name: getattr(outcome, name) for name in COUNTS}

        return write

    def summary(self, job):
        return {"decision": job.params["decision"], **units_results_summed(job, COUNTS)}
