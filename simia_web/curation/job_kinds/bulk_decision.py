"""The "bulk-decision" job kind: accept or reject every item of a filtered queue, too many for one request.

The job keeps the queue page's filter, not a list of ids; its units are ranges of ids, each deciding the items of
its range that match the filter when it runs, as reviews_bulk does (held items, items a person decided one by one
and, when accepting, empty ones are left and counted), under one batch. Its progress is the units done.
"""

from types import SimpleNamespace
from uuid import UUID

from django.db.models import Max, Min
from django.http import QueryDict

from simia_web.accounts.models import User
from simia_web.curation.selectors.queue import queue_filterset, queue_selection
from simia_web.curation.services import BULK_JOB_KIND, reviews_bulk
from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.models import JobUnit, UnitStatus

DECIDE = "decide"
# Ids per unit: a unit's writes (its trajectories, reviews, changes and audit rows) stay a short transaction.
IDS_PER_UNIT = 5_000
COUNTS = ("changed", "held", "decided", "unreviewable")


def _selection(job):
    reviewer = User.objects.get(pk=job.params["reviewer"])
    filterset = queue_filterset(params=QueryDict(job.params["query"]), request=SimpleNamespace(user=reviewer))
    return reviewer, queue_selection(filterset.qs)


@job_kind_register
class BulkDecisionKind(JobKind):
    kind = BULK_JOB_KIND
    label = "Bulk decision"
    stages = (DECIDE,)
    parameters = None  # queued from the review queue (curation.services.reviews_bulk_queue)

    def plan(self, job, stage):
        if stage is not None:
            return None
        _, selection = _selection(job)
        bounds = selection.aggregate(low=Min("pk"), high=Max("pk"))
        if bounds["low"] is None:
            return None
        return DECIDE, [
            UnitPlan(DECIDE, f"ids:{start}", {"from": start, "to": start + IDS_PER_UNIT})
            for start in range(bounds["low"], bounds["high"] + 1, IDS_PER_UNIT)
        ]

    def run(self, job, unit):
        def write():
            reviewer, selection = _selection(job)
            outcome = reviews_bulk(
                trajectories=selection.filter(pk__gte=unit.params["from"], pk__lt=unit.params["to"]),
                reviewer=reviewer,
                decision=job.params["decision"],
                reason=job.params["reason"],
                batch=UUID(job.params["batch"]),
            )
            return {name: getattr(outcome, name) for name in COUNTS}

        return write

    def summary(self, job):
        totals = dict.fromkeys(COUNTS, 0)
        for result in JobUnit.objects.filter(job=job, status=UnitStatus.DONE).values_list("result", flat=True):
            for name in COUNTS:
                totals[name] += result.get(name, 0)
        return {"decision": job.params["decision"], **totals}
