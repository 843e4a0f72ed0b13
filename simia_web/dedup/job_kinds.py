"""The "near-duplicates" job kind: a build of one corpus's near-duplicate index split across workers.

Its first stage is the corpus's items in ranges of `items_per_range` (dedup.selectors.index_ranges), each a unit any
worker takes: it signs the range's items (all of them with `resign`) and writes the range's signatures and bands with
COPY. Once every range is written, one final unit clusters the whole corpus from the bands. Both are the steps
manage.py near_duplicates runs in its own process over one range (dedup.services.index_build), so the clusters come
out the same. Each unit's writes are its writer's, in the transaction that marks it done: a range redelivered or run
twice at once is written once, and one run again rewrites only its own range.
"""

from functools import partial

from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.leases import unit_progress
from simia_web.jobs.models import JobUnit, UnitStatus

from .selectors import ItemRange, index_ranges
from .services import BUILD_JOB_KIND, index_build_outcome, index_clusters_merge, index_range_sign

SIGN, CLUSTER = "sign", "cluster"


def _key(ids: ItemRange) -> str:
    return f"items:{'' if ids.low is None else ids.low}-{'' if ids.high is None else ids.high}"


@job_kind_register
class NearDuplicatesKind(JobKind):
    kind = BUILD_JOB_KIND
    label = "Near-duplicate index build"
    stages = (SIGN, CLUSTER)
    parameters = None  # queued by manage.py near_duplicates --queue (dedup.services.index_build_queue)

    def plan(self, job, stage):
        corpus = job.params["corpus"]
        if stage is None:
            ranges = index_ranges(corpus=corpus, items_per_range=job.params["items_per_range"])
            return SIGN, [
                UnitPlan(SIGN, _key(ids), {"low": ids.low, "high": ids.high, "items": ids.items}) for ids in ranges
            ]
        if stage == SIGN:
            if job.units.filter(stage=SIGN).exclude(status=UnitStatus.DONE).exists():
                return None  # a range is missing: clusters from part of the bands would be wrong
            return CLUSTER, [UnitPlan(CLUSTER, "clusters")]
        return None

    def run(self, job, unit):
        corpus = job.params["corpus"]
        if unit.stage == SIGN:
            ids = ItemRange(unit.params["low"], unit.params["high"], unit.params["items"])
            progress = partial(_progress, unit.pk, ids.items, "items signed", f"Signing {corpus} {_key(ids)}")
            return index_range_sign(corpus=corpus, ids=ids, resign=job.params["resign"], progress=progress)
        progress = partial(_progress, unit.pk, 0, "items with candidates", f"Clustering {corpus}")
        return index_clusters_merge(corpus=corpus, progress=progress)

    def summary(self, job):
        results = JobUnit.objects.filter(job=job, status=UnitStatus.DONE).values_list("result", flat=True)
        return {"corpus": job.params["corpus"], "resign": job.params["resign"], **index_build_outcome(results)}


def _progress(unit_id: int, total: int, what: str, doing: str, done: int) -> None:
    unit_progress(unit_id, done, total, what=what, doing=doing)
