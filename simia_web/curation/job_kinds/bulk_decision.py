"""The "bulk-decision" job kind: accept or reject every item of a filtered queue, too many for one request.

The job keeps the queue page's filter (or names a selection another app registered, such as an audit's frozen
population: curation.services.bulk_selection_register), not a list of ids; its units are ranges of ids, each
deciding the items of its range that match the filter when it runs, as reviews_bulk does (held items, items a
person decided one by one and, when accepting, empty ones are left and counted), under one batch. Its progress is
the units done. It decides only items of its own workspace (the job's), whatever the filter or selection names.
"""

from types import SimpleNamespace
from uuid import UUID

from django.db.models import Max, Min
from django.http import QueryDict

from simia_web.accounts.models import User
from simia_web.accounts.scoping import scoped
from simia_web.curation.selectors.queue import queue_filterset, queue_selection
from simia_web.curation.services import BULK_JOB_KIND, BULK_SELECTIONS, reviews_bulk
from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.models import JobUnit, UnitStatus

DECIDE = "decide"
# Ids per unit: a unit's writes (its trajectories, reviews, changes and audit rows) stay a short transaction.
IDS_PER_UNIT = 5_000
COUNTS = ("changed", "held", "decided", "unreviewable")


def _selection(job):
    reviewer = User.objects.get(pk=job.params["reviewer"])
    filterset = queue_filterset(
        params=QueryDict(job.params["query"]),
        request=SimpleNamespace(user=reviewer),
        workspace_ids=[job.workspace_id],
    )
    return reviewer, queue_selection(filterset.qs)


def _bounds(job) -> tuple[int, int] | None:
    chosen = job.params.get("selection")
    if chosen:  # named by another app (an audit's population): it knows its bounds
        return BULK_SELECTIONS[chosen["name"]].bounds(chosen)
    _, selection = _selection(job)
    bounds = selection.aggregate(low=Min("pk"), high=Max("pk"))
    return None if bounds["low"] is None else (bounds["low"], bounds["high"])


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

    def plan(self, job, stage):
        if stage is not None:
            return None
        bounds = _bounds(job)
        if bounds is None:
            return None
        low, high = bounds
        return DECIDE, [
            UnitPlan(DECIDE, f"ids:{start}", {"from": start, "to": start + IDS_PER_UNIT})
            for start in range(low, high + 1, IDS_PER_UNIT)
        ]

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
        totals = dict.fromkeys(COUNTS, 0)
        for result in JobUnit.objects.filter(job=job, status=UnitStatus.DONE).values_list("result", flat=True):
            for name in COUNTS:
                totals[name] += result.get(name, 0)
        return {"decision": job.params["decision"], **totals}
