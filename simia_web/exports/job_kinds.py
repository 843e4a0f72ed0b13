"""The export job kind: units that each build a part of the job's snapshot (a range of trajectory ids, see
exports.parts), any worker taking any of them; one that merges the parts into the snapshot's files; then, when its
options ask, one that publishes it to the Hugging Face Hub. Its job page shows the snapshot; the API's job summary
names it."""

from functools import partial

from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.leases import unit_progress

from .hub import FAILED
from .models import Snapshot
from .parts import IdRange
from .services import (
    EXPORT,
    snapshot_build,
    snapshot_hub_record,
    snapshot_part_build,
    snapshot_publish,
    snapshot_ranges,
)

BUILD, MERGE, PUBLISH = "build", "merge", "publish"
# What a part's progress counts: the records its gate has handled, of those in its range matching the snapshot's
# filters (less the near-duplicates it drops).
BUILD_COUNTS = "records written or left out"
MERGE_COUNTS = "parts merged"


@job_kind_register
class ExportKind(JobKind):
    kind = EXPORT
    label = "Dataset export"
    stages = (BUILD, MERGE, PUBLISH)
    parameters = None  # queued with its snapshot (exports.services.snapshot_create)
    result_template = "exports/_job_snapshot.html"

    def plan(self, job, stage):
        snapshot = Snapshot.objects.get(job=job)
        if stage is None:
            ranges = snapshot_ranges(snapshot=snapshot)
            return BUILD, [
                UnitPlan(
                    BUILD,
                    f"part:{snapshot.pk}:{index:05d}",
                    {"snapshot": snapshot.pk, "part": index, "parts": len(ranges), "low": r.low, "high": r.high},
                )
                for index, r in enumerate(ranges)
            ]
        if stage == BUILD:
            parts = job.units.filter(stage=BUILD).count()
            return MERGE, [UnitPlan(MERGE, f"snapshot:{snapshot.pk}", {"snapshot": snapshot.pk, "parts": parts})]
        if stage == MERGE and snapshot.options.get("push_to_hub") and snapshot.is_built:
            return PUBLISH, [UnitPlan(PUBLISH, f"publish:{snapshot.pk}", {"snapshot": snapshot.pk})]
        return None

    def run(self, job, unit):
        snapshot = Snapshot.objects.get(pk=unit.params["snapshot"])
        if unit.stage == BUILD:
            index, parts = unit.params["part"], unit.params["parts"]
            doing = f"Building snapshot {snapshot.pk}" + (f", part {index + 1} of {parts}" if parts > 1 else "")
            progress = partial(unit_progress, unit.pk, what=BUILD_COUNTS, doing=doing)
            bounds = IdRange(unit.params["low"], unit.params["high"])
            return snapshot_part_build(snapshot=snapshot, index=index, bounds=bounds, progress=progress)
        if unit.stage == MERGE:
            progress = partial(unit_progress, unit.pk, what=MERGE_COUNTS, doing=f"Merging snapshot {snapshot.pk}")
            return snapshot_build(snapshot=snapshot, parts=unit.params["parts"], progress=progress)
        outcome = snapshot_publish(snapshot=snapshot)  # the network call, before the writer's transaction

        def record() -> dict:
            snapshot_hub_record(snapshot=snapshot, outcome=outcome)
            result = {"snapshot": snapshot.pk, "hub": outcome["status"], "detail": outcome["detail"]}
            return {**result, "error": outcome["detail"]} if outcome["status"] == FAILED else result

        return record

    def summary(self, job) -> dict:
        snapshot = Snapshot.objects.filter(job=job).only("count", "refused_count", "bytes", "sha256").first()
        if snapshot is None:
            return {}
        return {
            "snapshot": snapshot.pk,
            "built": snapshot.is_built,
            "records": snapshot.count,
            "left_out": snapshot.refused_count,
            "bytes": snapshot.bytes,
            "sha256": snapshot.sha256,
        }
