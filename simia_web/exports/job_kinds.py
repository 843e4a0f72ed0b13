"""The export job kind: units that each build a part of the job's snapshot (a range of trajectory ids, see
exports.parts), any worker taking any of them; one that merges the parts into the snapshot's files; then, when its
options ask, one that publishes it to the Hugging Face Hub. Its job page shows the snapshot; the API's job summary
names it.

A snapshot that keeps one trajectory per near-duplicate cluster reads which ones it leaves out once, when its ranges
are planned: each part's unit holds those of its range (`left_out`), and the merge's how many there were."""

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
                    {
                        "snapshot": snapshot.pk,
                        "part": index,
                        "parts": len(ranges),
                        "low": r.low,
                        "high": r.high,
                        "left_out": list(r.left_out),
                    },
                )
                for index, r in enumerate(ranges)
            ]
        if stage == BUILD:
            planned = list(job.units.filter(stage=BUILD).values_list("params", flat=True))
            removed = sum(len(params["left_out"]) for params in planned)
            params = {"snapshot": snapshot.pk, "parts": len(planned), "removed": removed}
            return MERGE, [UnitPlan(MERGE, f"snapshot:{snapshot.pk}", params)]
        if stage == MERGE and snapshot.options.get("push_to_hub") and snapshot.is_built:
            return PUBLISH, [UnitPlan(PUBLISH, f"publish:{snapshot.pk}", {"snapshot": snapshot.pk})]
        return None

    def run(self, job, unit):
        snapshot = Snapshot.objects.get(pk=unit.params["snapshot"])
        if unit.stage == BUILD:
            index, parts = unit.params["part"], unit.params["parts"]
            doing = f"Building snapshot {snapshot.pk}" + (f", part {index + 1} of {parts}" if parts > 1 else "")
            progress = partial(unit_progress, unit.pk, what=BUILD_COUNTS, doing=doing)
            bounds = IdRange(unit.params["low"], unit.params["high"], tuple(unit.params["left_out"]))
            return snapshot_part_build(snapshot=snapshot, index=index, bounds=bounds, progress=progress)
        if unit.stage == MERGE:
            progress = partial(unit_progress, unit.pk, what=MERGE_COUNTS, doing=f"Merging snapshot {snapshot.pk}")
            parts, removed = unit.params["parts"], unit.params["removed"]
            return snapshot_build(snapshot=snapshot, parts=parts, removed=removed, progress=progress)
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
